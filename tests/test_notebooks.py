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
CELL_TIMEOUT = 300  # seconds per cell: the slowest cell (head training in 03) takes well under a minute idle
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
    closing = "\n".join(markdown[-3:])
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


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_top_to_bottom(path):
    start = time.perf_counter()
    nb = execute.execute_notebook(path, timeout=CELL_TIMEOUT, write=False)
    seconds = time.perf_counter() - start
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip())
    print(f"{path.name}: {seconds:.1f} s")
