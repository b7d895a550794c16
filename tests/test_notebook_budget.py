"""Each notebook's main line stays readable: at most 2,500 words of markdown before its `## Appendix` (12,500 over
the series), and no code cell there over 25 lines (read only, not executed)."""
import nbformat
import pytest

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS, MAX_TOTAL_WORDS, MAX_CODE_LINES = 2500, 12500, 25


def main_line(path) -> list:
    """The cells before the markdown cell that opens with "## Appendix" (all cells if there is none)."""
    cells = nbformat.read(path, 4).cells
    end = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Appendix")),
               len(cells))
    return cells[:end]


def words(path) -> int:
    return sum(len(c.source.split()) for c in main_line(path) if c.cell_type == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_main_line_within_budget(path):
    assert words(path) <= MAX_WORDS, f"{path.name}: {words(path)} markdown words before the Appendix"
    long = [(i, len(c.source.splitlines())) for i, c in enumerate(main_line(path))
            if c.cell_type == "code" and len(c.source.splitlines()) > MAX_CODE_LINES]
    assert not long, f"{path.name}: code cells over {MAX_CODE_LINES} lines (index, lines): {long}"


def test_series_within_budget():
    counts = {path.stem: words(path) for path in NOTEBOOKS}
    assert sum(counts.values()) <= MAX_TOTAL_WORDS, f"{sum(counts.values())} main-line words in all: {counts}"
