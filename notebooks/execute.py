"""Execute the notebooks top to bottom with nbclient, writing the outputs back in place.

    python notebooks/execute.py                 # every notebooks/NN_*.ipynb, in order
    python notebooks/execute.py 02 03           # the ones whose names start with 02 or 03
    python notebooks/execute.py --check         # execute into memory only; leave the files untouched
    python notebooks/execute.py --model /tmp/my-qwen3 --device cuda --out runs/nb   # another model / device

Each cell gets `--timeout` seconds (default 300, five times the 60 s a cell may take on an idle
machine); the kernel runs in notebooks/, as in Jupyter. The kernel gets OMP_NUM_THREADS=1 unless the
environment sets it: with torch's default threads, one other busy process on a 2-core machine made a
notebook-like workload 5-10x slower (scripts/busy_bench.py). `--model` / `--device` replace the
`MODEL = ...` / `DEVICE = ...` lines of the first code cells; such runs never overwrite the notebooks
(use --out DIR to keep the executed copies, or --check).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent
CELL_TIMEOUT = 300
SELECTOR_CELLS = 3  # MODEL and DEVICE are set in one of the first code cells


def notebook_paths(prefixes: list[str] | None = None) -> list[Path]:
    """notebooks/NN_*.ipynb in order, filtered by name prefixes (all when none given)."""
    paths = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if prefixes:
        paths = [p for p in paths if any(p.name.startswith(x) for x in prefixes)]
    return paths


def override_selectors(nb: nbformat.NotebookNode, model: str | None = None, device: str | None = None) -> None:
    """Replace the `MODEL = ...` / `DEVICE = ...` line of the first code cells (in place); raise if absent."""
    cells = [c for c in nb.cells if c.cell_type == "code"][:SELECTOR_CELLS]
    for name, value in (("MODEL", model), ("DEVICE", device)):
        if value is None:
            continue
        line = re.compile(rf"^{name} = .*$", re.M)
        cell = next((c for c in cells if line.search(c.source)), None)
        if cell is None:
            raise ValueError(f"no `{name} = ...` line in the first {SELECTOR_CELLS} code cells")
        cell.source = line.sub(f"{name} = {value!r}  # set by notebooks/execute.py", cell.source, count=1)


def pop_cell_times(nb: nbformat.NotebookNode) -> dict[int, float]:
    """Remove each cell's execution timestamps (saved notebooks then change only with their sources and outputs);
    return {cell index: seconds it ran}."""
    seconds = {}
    for i, cell in enumerate(nb.cells):
        times = cell.get("metadata", {}).pop("execution", None)
        if times and "iopub.execute_input" in times and "shell.execute_reply" in times:
            start, end = (datetime.fromisoformat(times[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))
            seconds[i] = (end - start).total_seconds()
    return seconds


def installed_kernelspec(name: str = "python3") -> dict:
    """The notebook metadata JupyterLab writes for the installed kernel `name` (ipykernel's, from
    requirements.txt): storing exactly this keeps a freshly opened notebook unmodified."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(name)
    return {"display_name": spec.display_name, "language": spec.language, "name": name}


def execute_notebook(
    path: Path,
    timeout: int = CELL_TIMEOUT,
    write: bool = True,
    model: str | None = None,
    device: str | None = None,
    out: Path | None = None,
) -> tuple[nbformat.NotebookNode, dict[int, float]]:
    """Run every cell of `path` in a fresh kernel (cwd = notebooks/); raise on the first failing cell.
    Returns the executed notebook and {cell index: seconds}.

    write: save the outputs back into `path` (refused with a model/device override); out: a folder to
    save the executed copy into instead (its name unchanged).
    """
    if write and (model or device):
        raise ValueError("a notebook run with another MODEL or DEVICE must not overwrite the notebook; use out=")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the kernel inherits it (see the module docstring)
    nb = nbformat.read(path, as_version=4)
    override_selectors(nb, model, device)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute()
        nb.metadata.kernelspec = installed_kernelspec()
    finally:
        seconds = pop_cell_times(nb)
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, Path(out) / path.name)
    if write:
        nbformat.write(nb, path)
    return nb, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 00 03 (default: all)")
    p.add_argument("--timeout", type=int, default=CELL_TIMEOUT, help=f"seconds per cell (default: {CELL_TIMEOUT})")
    p.add_argument("--check", action="store_true", help="do not write the outputs back")
    p.add_argument("--model", help="run with MODEL set to this name or folder (never writes in place)")
    p.add_argument("--device", help='run with DEVICE set to this, e.g. "cuda" (never writes in place)')
    p.add_argument("--out", type=Path, help="write the executed copies into this folder instead")
    p.add_argument("--keep-going", action="store_true", help="run the other notebooks after one fails")
    args = p.parse_args(argv)
    paths = notebook_paths(args.prefixes)
    if not paths:
        print(f"no notebook matches {args.prefixes}", file=sys.stderr)
        return 1
    in_place = not (args.check or args.out or args.model or args.device)
    total, failed = time.perf_counter(), []
    for path in paths:
        start = time.perf_counter()
        try:
            _, seconds = execute_notebook(path, args.timeout, in_place, args.model, args.device, args.out)
        except Exception as error:  # noqa: BLE001 - reported per notebook
            if not args.keep_going:
                raise
            failed.append(path.name)
            print(f"{path.name}: FAILED after {time.perf_counter() - start:.1f} s: {type(error).__name__}: "
                  f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}", flush=True)
            continue
        slowest = max(seconds.items(), key=lambda item: item[1], default=(None, 0.0))
        print(f"{path.name}: {time.perf_counter() - start:.1f} s (slowest cell: index {slowest[0]}, {slowest[1]:.1f} s)",
              flush=True)
    print(f"all {len(paths)}: {time.perf_counter() - total:.1f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
