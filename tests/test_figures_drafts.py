"""tree_spec.ui.figures_drafts and the labels of plots.draw_dynamic_growth: each figure draws what it is given."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from tree_spec.analysis.train_heads import ttt_mask  # noqa: E402
from tree_spec.ui.figures_drafts import draw_lookahead_step, draw_ttt_masks  # noqa: E402
from tree_spec.ui.plots import draw_dynamic_growth  # noqa: E402


def test_lookahead_step_shows_window_pool_and_verified_trie():
    # root r; window guesses a, b (nodes 1, 2); the pool's candidate for r: (c, d) (nodes 3, 4); accepted r -> a
    labels, parents = ["r", "a", "b", "c", "d"], [-1, 0, 1, 0, 3]
    fig = draw_lookahead_step(labels, parents, window=[1, 2], predicted=["a", "x", "y"],
                              grams=[("a", ("x", "y"))], accepted=[0, 1])
    left, middle, right = fig.axes
    row = lambda y: [t.get_text() for t in left.texts if t.get_position()[1] == y and t.get_text() != ""]
    assert row(1)[:3] == ["r", "a", "b"] and row(0)[:3] == ["a", "x", "y"]   # the window; the target's argmaxes
    assert [t.get_text() for t in middle.texts if t.get_text() != "→"] == ["a", "x", "y"]   # one n-gram, key first
    assert sorted(t.get_text() for t in right.texts) == sorted(labels)                      # every trie node
    green = [line for line in right.lines if line.get_linewidth() > 2]
    assert len(green) == 1 and len(right.lines) == 4                                        # r -> a accepted


def test_lookahead_step_needs_an_argmax_per_window_node_and_root():
    with pytest.raises(ValueError):
        draw_lookahead_step(["r", "a"], [-1, 0], window=[1], predicted=["a"], grams=[])


def test_ttt_masks_label_pairs_and_key_blocks():
    n = 4
    fig = draw_ttt_masks([ttt_mask(n, s) for s in (1, 2, 3)])
    assert len(fig.axes) == 3
    third = fig.axes[2]
    assert [t.get_text() for t in third.get_yticklabels()] == [f"pair {i}" for i in range(n)]
    assert [t.get_text() for t in third.texts] == ["true pairs", "step 2 out", "step 3 out"]
    assert len(third.get_xticklabels()) == 3 * n
    assert third.images[0].get_array().sum() == ttt_mask(n, 3).sum()   # the cells drawn are the mask's
    with pytest.raises(ValueError):
        draw_ttt_masks([ttt_mask(n, 1), ttt_mask(n, 3)])


def test_dynamic_growth_labels_its_cutoff_and_last_level():
    # root, two children (scores -0.5, -1.0), one grandchild (-1.2); keep the 2 best
    parents, scores = [-1, 0, 0, 1], [0.0, -0.5, -1.0, -1.2]
    fig = draw_dynamic_growth(parents, scores, expanded=[[0], [1]], kept=[0, 1, 2])
    final = [ax for ax in fig.axes if ax.get_title().startswith("rerank")][0]
    texts = [t.get_text() for t in final.get_legend().get_texts()]
    assert texts == ["cutoff -1.00: the lowest kept score", "growth stops at depth 2"]
