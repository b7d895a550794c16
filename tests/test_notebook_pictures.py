"""Every committed notebook cell that draws stores its picture: a PNG or a live widget (read only, not executed).

A cell draws when its top-level code (function and class bodies excluded: defining is not drawing) calls a
`draw_*` function, a `plt.*` function other than a few that draw nothing (`plt.close`, `plt.rc`, ...) or a
class (`plt.Rectangle`), `Figure(...)`, or a plotting method (`.plot(`, `.bar(`, `.imshow(`, ...; not `.step(`
or `.scatter(`, which optimizers and tensors have too). A figure made without pyplot (`matplotlib.figure.Figure`, as in
`tree_spec.ui.figures_trees`) is invisible to `plt.show()`: such a cell stored nothing until it ended with the
figure itself.
"""
import ast

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PICTURES = ("image/png", "application/vnd.jupyter.widget-view+json")
PLT_NOT_DRAWING = {"close", "rc", "rcdefaults", "rc_context", "ion", "ioff", "isinteractive", "switch_backend",
                   "get_backend", "get_cmap", "get_fignums"}
PLOT_METHODS = {"plot", "bar", "barh", "hist", "imshow", "matshow", "pcolormesh", "errorbar", "fill_between",
                "boxplot", "violinplot", "pie"}


def _draws(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name.startswith("draw_") or name == "Figure" or (isinstance(func, ast.Attribute) and name in PLOT_METHODS):
        return True
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "plt"
            and name[:1].islower() and name not in PLT_NOT_DRAWING)


def drawing_calls(source: str) -> list[str]:
    """The source text of each drawing call in a cell's top-level code (IPython magics allowed)."""
    code = TransformerManager().transform_cell(source)
    found, stack = [], list(ast.parse(code).body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call) and _draws(node):
            found.append(" ".join(ast.get_source_segment(code, node).split()))
        stack.extend(ast.iter_child_nodes(node))
    return found


def missing_pictures(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """'name cell i: call' for each drawing code cell that stores no picture (i counts every cell from 0; call:
    the cell's first drawing call)."""
    missing = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        calls = drawing_calls(cell.source)
        stored = any(kind in out.get("data", {}) for out in cell.outputs for kind in PICTURES)
        if calls and not stored:
            shown = calls[0] if len(calls[0]) <= 100 else calls[0][:97] + "..."
            missing.append(f"{name} cell {i}: {shown}")
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_drawing_cell_stores_a_picture(path):
    missing = missing_pictures(nbformat.read(path, as_version=4), path.name)
    assert not missing, "drawing cells without a stored picture (re-execute: python notebooks/execute.py):\n" + \
        "\n".join(missing)


def _notebook(*cells) -> nbformat.NotebookNode:
    """A notebook of code cells given as (source, outputs) and markdown cells given as plain strings."""
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(c) if isinstance(c, str) else nbformat.v4.new_code_cell(c[0], outputs=c[1])
        for c in cells])


PNG = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
WIDGET = nbformat.v4.new_output("display_data", data={
    "application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2, "version_minor": 0},
    "text/plain": "Panel()"})
FIGURE_TEXT = nbformat.v4.new_output("execute_result", data={"text/plain": "<Figure size 600x360 with 1 Axes>"},
                                     execution_count=3)


def test_a_drawing_cell_without_a_picture_is_reported_with_its_notebook_index_and_call():
    nb = _notebook("# title", ("import matplotlib.pyplot as plt", []),
                   ("draw_reach({'chain': [0.8, 0.5]},\n           title='reach'); plt.show()", []),
                   ("fig = draw_reach({'chain': [0.8]})\nfig", [FIGURE_TEXT]))
    assert missing_pictures(nb, "99_x.ipynb") == [
        "99_x.ipynb cell 2: draw_reach({'chain': [0.8, 0.5]}, title='reach')",
        "99_x.ipynb cell 3: draw_reach({'chain': [0.8]})"]
    assert drawing_calls(nb.cells[2].source) == ["draw_reach({'chain': [0.8, 0.5]}, title='reach')", "plt.show()"]


@pytest.mark.parametrize("source", [
    "draw_tree(parents); plt.show()",
    "fig, ax = plt.subplots()\nax.plot([1, 2])",
    "display(curve.plot())",
    "for seed in range(3):\n    figures.draw_mask(parents)",
    "%matplotlib inline\nplt.hist([1, 2, 2])",
    "fig = Figure(figsize=(4, 3))\nfig.subplots().bar([0, 1], [2, 3])\nfig",
    "ax.imshow(mask, cmap='Blues')",
])
def test_drawing_cells_pass_with_a_png_and_fail_without(source):
    assert drawing_calls(source)
    assert missing_pictures(_notebook((source, [PNG])), "nb") == []
    assert len(missing_pictures(_notebook((source, [])), "nb")) == 1


def test_a_widget_counts_as_a_picture():
    assert missing_pictures(_notebook(("display(draw_panel(x=1))", [WIDGET])), "nb") == []


@pytest.mark.parametrize("source", [
    "import matplotlib.pyplot as plt\nfrom tree_spec.ui.figures_trees import draw_reach, draw_flat_tree_mask",
    "def show(parents):\n    draw_tree(parents)\n    plt.show()",
    "class Plotter:\n    def go(self):\n        self.ax.plot([1])",
    "redraw = lambda: plt.plot([1])",
    "plt.close('all'); plt.rc('font', size=9)\nhandle = plt.Rectangle((0, 0), 1, 1)",
    "draw_count = 3  # draw_tree( in a comment\nprint('plt.show()')",
    "optimizer.step(); scheduler.step()\nhits = torch.zeros(4).scatter(0, idx, 1.0)",
])
def test_cells_that_only_import_define_or_configure_are_ignored(source):
    assert drawing_calls(source) == []
    assert missing_pictures(_notebook((source, [])), "nb") == []
