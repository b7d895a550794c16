"""tree_spec.ui.figures_trees: each figure draws from the numbers it is given and returns a Figure."""
import matplotlib

matplotlib.use("Agg")

from tree_spec.ui.figures_trees import (  # noqa: E402
    OKABE_ITO, draw_draft_heads, draw_flat_tree_mask, draw_reach, draw_sibling_rejection,
)


def test_flat_tree_mask_draws_one_cell_per_query_and_key():
    parents, labels = [-1, 0, 0, 1, 1, 2], list("abcdef")
    fig = draw_flat_tree_mask(parents, labels, prefix_len=10, shown_prefix=3)
    top, bottom = fig.axes
    assert len(bottom.patches) == 6 * (3 + 6)                    # n rows x (shown prefix + n) columns
    filled = [p for p in bottom.patches if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert len(filled) == 6 * 3 + sum([1, 2, 2, 3, 3, 3])       # prefix all visible + each node's path
    texts = [t.get_text() for t in top.texts]
    assert "12" in texts and "11" in texts                       # positions prefix_len + depth
    rows = [t.get_text() for t in bottom.get_yticklabels()]
    columns = [t.get_text() for t in bottom.get_xticklabels()]
    assert rows == [f"{i} {c}" for i, c in enumerate(labels)]    # every row names its node's index
    assert columns[3:] == rows and all(c.startswith("slot") for c in columns[:3])   # tree columns too


def test_reach_has_one_line_per_shape():
    fig = draw_reach({"chain": [0.9, 0.8], "tree": [1.0, 0.9]}, nodes={"chain": 2, "tree": 6})
    assert len(fig.axes[0].lines) == 2
    assert "6 nodes" in fig.axes[0].get_legend().get_texts()[1].get_text()


def test_sibling_rejection_has_a_panel_per_stage():
    stages = [dict(target=[0.5, 0.5], draft=[0.9, 0.1], token=0, accepted=False),
              dict(target=[0.0, 1.0], draft=[0.0, 1.0], token=1, accepted=True)]
    fig = draw_sibling_rejection(stages, labels=["x", "y"])
    assert len(fig.axes) == 2 and "rejected" in fig.axes[0].get_title()


def test_draft_heads_side_by_side():
    facts = {k: dict(reads="r", block="b", predicts="p", note="n") for k in ("Medusa", "EAGLE", "MTP")}
    fig = draw_draft_heads(facts)
    assert len(fig.axes) == 3 and all(c.startswith("#") for c in OKABE_ITO.values())
