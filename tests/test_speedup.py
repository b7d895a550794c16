"""The speedup formulas, the chapter's roofline table (every printed number), tail latency, chi-square."""
from __future__ import annotations

import math

import pytest
import torch

from tree_spec.speedup import (
    break_even_alpha,
    chi_square,
    chi_square_sf,
    expected_speedup,
    expected_tokens_per_verify,
    production_speedup,
    roofline_step_time,
    simulate_tail,
    speedup_table,
    tree_expected_tokens,
    tree_node_count,
    tree_verify_tokens,
    wall_time_per_token,
)


def test_expected_tokens_per_verify() -> None:
    assert f"{expected_tokens_per_verify(0.8, 4):.2f}" == "3.36"
    assert expected_tokens_per_verify(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)
    assert expected_tokens_per_verify(1.0, 4) == 5
    assert expected_tokens_per_verify(0.0, 4) == 1
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_verify(1.2, 4)


def test_wall_time_speedup_and_break_even() -> None:
    assert wall_time_per_token(0.8, 4, 0.05) == pytest.approx(1.2 / 3.3616)
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert expected_speedup(0.8, 4, 0.0) > expected_speedup(0.8, 8, 0.05)  # alpha, not k, is the lever
    assert production_speedup(0.8, 4, 0.5) == pytest.approx(4.2 / 1.5)
    for overhead, k in [(0.5, 4), (1.2, 3)]:
        assert production_speedup(break_even_alpha(overhead, k), k, overhead) == pytest.approx(1.0)


def test_tree_counts_and_expected_tokens() -> None:
    assert tree_node_count([2, 2, 1, 1]) == 14 and tree_node_count([3, 3, 2]) == 30
    assert tree_verify_tokens([2, 2, 1, 1], batch=64) == 960
    assert tree_expected_tokens([1, 1, 1, 1], 0.8) == pytest.approx(expected_tokens_per_verify(0.8, 4))
    assert tree_expected_tokens([2, 2, 1, 1], 0.6) > tree_expected_tokens([1, 1, 1, 1], 0.6)
    assert tree_expected_tokens([2], 0.5) == pytest.approx(1 + 0.75)
    assert tree_expected_tokens([3, 3, 2], 1.0) == 4
    with pytest.raises(ValueError, match="branching"):
        tree_node_count([2, 0])


def test_speedup_table_reproduces_the_chapter() -> None:
    rows = [(r.batch, f"{r.decode_ms:.2f}", f"{r.verify_ms:.2f}", f"{r.speedup:.2f}") for r in speedup_table()]
    assert rows == [
        (1, "4.85", "4.85", "2.80"),
        (4, "4.91", "4.91", "2.80"),
        (16, "5.12", "5.12", "2.80"),
        (64, "5.96", "8.50", "2.07"),
        (128, "7.08", "16.69", "1.31"),
        (256, "9.32", "33.09", "0.90"),
    ]


def test_roofline_regimes() -> None:
    assert roofline_step_time(1) == pytest.approx((15.2e9 + 1024 * 57_344) / 3.35e12 + 0.3e-3)  # memory-bound
    assert roofline_step_time(64, 5) == pytest.approx(2 * 7.6e9 * 320 / (989e12 * 0.6) + 0.3e-3)  # compute-bound
    assert roofline_step_time(1, 5) == roofline_step_time(1)  # verifying 5 tokens is free at batch 1


def test_simulate_tail() -> None:
    tail = simulate_tail(0.8, 4, 0.05, n_tokens=1000, seed=0)
    assert tail.spec_itl.shape == tail.plain_itl.shape == (1000,)
    assert (tail.plain_mean, tail.plain_p99) == (1.0, 1.0)
    # the mean of 1000 tokens is within ~3 standard errors (about 0.02) of the formula
    assert tail.spec_mean == pytest.approx(wall_time_per_token(0.8, 4, 0.05), abs=0.03)
    assert tail.spec_p99 == pytest.approx(1.2)  # mean ITL down, P99 up: a step's first token waits it out
    assert simulate_tail(0.8, 4, 0.05, seed=0).spec_itl.equal(tail.spec_itl)


def test_chi_square_sf_matches_known_values() -> None:
    for x in [0.1, 1.0, 3.0, 10.0, 40.0, 150.0]:  # closed forms, both the series and the continued fraction
        assert chi_square_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9)
        assert chi_square_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-9)
        assert chi_square_sf(x, 4) == pytest.approx(math.exp(-x / 2) * (1 + x / 2), rel=1e-9)
    # 5 % critical values from standard tables (3 decimals -> p within 1e-4)
    for x, dof in [(3.841, 1), (11.070, 5), (18.307, 10), (124.342, 100)]:
        assert chi_square_sf(x, dof) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_sf(0.0, 3) == 1.0


def test_chi_square() -> None:
    assert chi_square([10, 20, 30], [1, 2, 3]) == (0.0, 1.0)  # expected may be probabilities
    statistic, p = chi_square([12, 18, 30], [10, 20, 30])
    assert statistic == pytest.approx(0.4 + 0.2) and p == pytest.approx(math.exp(-0.3))
    assert chi_square([5, 1], [1, 0]) == (math.inf, 0.0)  # observed where the target has no mass
    assert chi_square([5, 0], [1, 0]) == (0.0, 1.0)  # empty zero-mass bins are dropped
    # bins expected 1, 2, 3 (< 5) are pooled into one bin expected 6, observed 9
    statistic, _ = chi_square([2, 3, 4, 41, 50], [1, 2, 3, 44, 50])
    assert statistic == pytest.approx((9 - 6) ** 2 / 6 + 3**2 / 44)
    counts = torch.tensor([3.0, 0.0, 1.0])
    assert chi_square(counts, counts)[1] == 1.0  # the pooled bin absorbs bins until it reaches 5: one bin left
