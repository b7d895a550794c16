"""Execute the notebooks top to bottom with nbclient, writing the outputs back in place.

    python notebooks/execute.py                 # every notebooks/NN_*.ipynb, in order
    python notebooks/execute.py 02 03           # the ones whose names start with 02 or 03
    python notebooks/execute.py --check         # execute into memory only; leave the files untouched

Each cell gets `--timeout` seconds (default 300); the kernel runs in notebooks/, as in Jupyter.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent


def notebook_paths(prefixes: list[str] | None = None) -> list[Path]:
    """notebooks/NN_*.ipynb in order, filtered by name prefixes (all when none given)."""
    paths = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if prefixes:
        paths = [p for p in paths if any(p.name.startswith(x) for x in prefixes)]
    return paths


def execute_notebook(path: Path, timeout: int = 300, write: bool = True) -> nbformat.NotebookNode:
    """Run every cell of `path` in a fresh kernel (cwd = notebooks/); raise on the first failing cell."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    if write:
        nbformat.write(nb, path)
    return nb


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 00 03 (default: all)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per cell (default: 300)")
    p.add_argument("--check", action="store_true", help="do not write the outputs back")
    args = p.parse_args(argv)
    paths = notebook_paths(args.prefixes)
    if not paths:
        print(f"no notebook matches {args.prefixes}", file=sys.stderr)
        return 1
    total = time.perf_counter()
    for path in paths:
        start = time.perf_counter()
        execute_notebook(path, args.timeout, write=not args.check)
        print(f"{path.name}: {time.perf_counter() - start:.1f} s")
    print(f"all {len(paths)}: {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
