"""Notebook 01's speedup chart (tree_spec.ui.figures_speedup) draws the repeats it is given and refuses bad input."""
import pytest
from matplotlib.figure import Figure

from tree_spec.ui.figures_speedup import VERDICT_COLORS, draw_speedups


def test_one_bar_per_drafter_at_the_median_with_the_range_as_error_bar():
    speedups = {"faster": [1.4, 1.5, 1.7], "noise": [0.95, 1.1, 1.0], "slower": [0.8, 0.7, 0.9]}
    fig = draw_speedups(speedups)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    bars = ax.patches
    assert [round(b.get_height(), 6) for b in bars] == [1.5, 1.0, 0.8]
    assert [b.get_facecolor()[:3] for b in bars] == [
        pytest.approx(tuple(int(VERDICT_COLORS[v][i:i + 2], 16) / 255 for i in (1, 3, 5)))
        for v in ("faster", "within noise", "slower")]
    (segments,) = [c.get_segments() for c in ax.collections]   # the error bars: one vertical segment per bar
    assert [(round(s[0][1], 6), round(s[1][1], 6)) for s in segments] == [(1.4, 1.7), (0.95, 1.1), (0.7, 0.9)]
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.lines), "a line at 1x"
    labels = [t.get_text() for t in ax.texts]
    assert labels[0] == "1.50x\n(1.40–1.70)" and [t.get_text() for t in ax.get_xticklabels()] == list(speedups)


def test_refuses_no_drafters_and_a_drafter_without_repeats():
    with pytest.raises(ValueError):
        draw_speedups({})
    with pytest.raises(ValueError, match="b"):
        draw_speedups({"a": [1.0], "b": []})
