"""The notebook series: structure, committed outputs, and a top-to-bottom execution of each on the embedded model."""
import importlib.util
import re
import time

import nbformat
import pytest

from tests.conftest import REPO

spec = importlib.util.spec_from_file_location("execute", REPO / "notebooks" / "execute.py")
execute = importlib.util.module_from_spec(spec)
spec.loader.exec_module(execute)

NOTEBOOKS = execute.notebook_paths()
# seconds per cell: 5x the 60 s a cell may take on an idle machine; the kernel runs torch with one thread
# (execute.py), so another busy process does not make torch's threads spin against it
CELL_TIMEOUT = execute.CELL_TIMEOUT
EXERCISES = {p.name[:2] for p in (REPO / "practice" / "exercises").iterdir() if p.is_dir()}


def test_the_series_has_six_numbered_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["00", "01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_structure(path):
    nb = nbformat.read(path, as_version=4)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    head = "\n".join(markdown[:3])
    assert head.count("<details>") >= 3, "3-5 self-test questions with collapsed answers at the top"
    assert any(re.search(r'^MODEL = "', c, re.M) for c in code[:3]), "a model selector cell at the top"
    assert sum("assert " in c for c in code) >= 3, "a sanity check after every component"
    main = markdown[:next((i for i, m in enumerate(markdown) if m.startswith("## Appendix")), len(markdown))]
    closing = "\n".join(main[-3:])   # the main line's closing cells (an appendix may follow them)
    started = set(re.findall(r"judge\.py start (\d\d)", closing))
    assert started and started <= EXERCISES, f"the closing cell names practice exercises: {started}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_executed(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.execution_count for c in cells]
    assert None not in counts, f"{path.name}: unexecuted cells; run python notebooks/execute.py"
    assert counts == sorted(counts), f"{path.name}: cells executed out of order; run python notebooks/execute.py"
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: committed with an error output"
    timed = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not timed, f"{path.name}: cells {timed} keep execution timestamps; run python notebooks/execute.py"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_top_to_bottom(path):
    start = time.perf_counter()
    nb, _ = execute.execute_notebook(path, timeout=CELL_TIMEOUT, write=False)
    seconds = time.perf_counter() - start
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip())
    print(f"{path.name}: {seconds:.1f} s")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_kernel_metadata_matches_the_installed_kernel(path):
    """Opening a notebook must not mark it modified: JupyterLab rewrites kernelspec and language_info
    when they differ from what the kernel (ipykernel, from requirements.txt) reports."""
    import platform

    from ipykernel.ipkernel import IPythonKernel

    meta = nbformat.read(path, as_version=4).metadata
    assert meta.kernelspec == execute.installed_kernelspec()
    expected = dict(IPythonKernel.language_info, version=platform.python_version())
    assert {k: v for k, v in meta.language_info.items() if k != "version"} == \
        {k: v for k, v in expected.items() if k != "version"}
    assert meta.language_info.version.split(".")[0] == "3"


def test_model_and_device_overrides_replace_only_the_selector_lines():
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    before = [c.source for c in nb.cells]
    execute.override_selectors(nb, model="/tmp/other-qwen3", device="cuda")
    changed = [(a, b.source) for a, b in zip(before, nb.cells) if a != b.source]
    assert len(changed) == 1
    old, new = changed[0]
    assert "MODEL = '/tmp/other-qwen3'" in new and "DEVICE = 'cuda'" in new
    assert [line for line in old.splitlines() if not line.startswith(("MODEL =", "DEVICE ="))] == \
        [line for line in new.splitlines() if not line.startswith(("MODEL =", "DEVICE ="))]
    with pytest.raises(ValueError, match="overwrite"):
        execute.execute_notebook(NOTEBOOKS[0], write=True, model="/tmp/other-qwen3")
    with pytest.raises(ValueError, match="MODEL"):
        execute.override_selectors(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), model="m")
