"""The serving figures of notebooks 04 and 05: the numbers they plot come from the package's math."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from tree_spec.analysis.speedup import Roofline, expected_tokens_per_verify, roofline_step_time
from tree_spec.ui.figures_serving import (
    break_even_curves, draw_batched_verify, draw_break_even, draw_roofline, draw_serving_stack, draw_slot_timeline,
    roofline_points,
)

H100 = Roofline()


def test_roofline_points_sit_on_the_roof():
    ridge = H100.peak_flops * H100.efficiency / H100.bandwidth
    for batch, tokens in ((1, 1), (1, 5), (64, 5), (256, 5), (1024, 1)):
        intensity, attained = roofline_points(batch, tokens, hw=H100)
        roof = min(H100.peak_flops * H100.efficiency, intensity * H100.bandwidth)
        assert attained == pytest.approx(roof, rel=1e-9)
    assert roofline_points(1, 1)[0] < ridge < roofline_points(256, 5)[0]   # decode memory-bound, big verify not
    assert roofline_points(64, 5)[0] == pytest.approx(5 * roofline_points(64, 1)[0])   # same bytes, 5x the FLOPs


def test_break_even_curves_rise_with_batch_and_agree_in_both_units():
    batches, k, c = (1, 16, 64, 128, 256), 4, 0.05
    ratios, alphas = break_even_curves(batches, k, c)
    assert ratios == sorted(ratios) and alphas == sorted(alphas)
    assert ratios[0] == pytest.approx(0.05) and alphas[-1] == pytest.approx(0.855, abs=1e-3)
    for b, ratio, alpha in zip(batches, ratios, alphas):
        overhead = (roofline_step_time(b, k + 1) + k * c * roofline_step_time(b, 1)) / roofline_step_time(b, 1) - 1
        assert 1 + k * ratio == pytest.approx(1 + overhead)
        assert expected_tokens_per_verify(alpha, k) == pytest.approx(1 + overhead, abs=1e-6)


def test_every_figure_draws():
    figs = [
        draw_roofline((1, 16, 64, 256), 4),
        draw_break_even((1, 16, 64, 256), 4, 0.05, alpha=0.8),
        draw_batched_verify([[1, 1, 0, 1], [0, 0, 0, 1], [1, 1, 1, 1]], [2, 0, 4], [64, 40, 56], [67, 41, 61]),
        draw_slot_timeline([(0, 0, 10, 0), (1, 10, 5, 2), (2, 13, 5, 0), (3, 18, 5, 4)]),
        draw_serving_stack(),
    ]
    assert all(f.axes for f in figs)
    for f in figs:
        plt.close(f)
