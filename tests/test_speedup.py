"""The speedup formulas, the roofline table (every printed number), tail latency, chi-square."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from tree_spec.analysis.speedup import (
    break_even_acceptance_ratio, expected_speedup, expected_tokens_per_verify, production_speedup, roofline_step_time, simulate_tail, speedup_table, tau_from_acceptance_ratio, tau_from_alpha_at_depth, tree_expected_tokens, tree_verify_tokens, wall_time_per_token,
)
from tree_spec.analysis.stats import chi_square, chi_square_sf, sign_test
from tree_spec.core.topology import tree_node_count


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
        assert production_speedup(break_even_acceptance_ratio(overhead, k), k, overhead) == pytest.approx(1.0)


def test_tree_counts_and_expected_tokens() -> None:
    assert tree_node_count([2, 2, 1, 1]) == 14 and tree_node_count([3, 3, 2]) == 30
    assert tree_verify_tokens([2, 2, 1, 1], batch=64) == 960
    assert tree_expected_tokens([1, 1, 1, 1], 0.8) == pytest.approx(expected_tokens_per_verify(0.8, 4))
    assert tree_expected_tokens([2, 2, 1, 1], 0.6) > tree_expected_tokens([1, 1, 1, 1], 0.6)
    assert tree_expected_tokens([2], 0.5) == pytest.approx(1 + 0.75)
    assert tree_expected_tokens([3, 3, 2], 1.0) == 4
    with pytest.raises(ValueError, match="branching"):
        tree_node_count([2, 0])


def test_speedup_table_reproduces_the_published_numbers() -> None:
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


def test_sign_test_matches_exact_binomial_tails() -> None:
    assert sign_test(6, 6) == sign_test(0, 6) == pytest.approx(2 / 64)       # the smallest p of 6 rounds
    assert sign_test(3, 15) == pytest.approx(2 * (1 + 15 + 105 + 455) / 2 ** 15)
    assert sign_test(3, 6) == 1.0 and sign_test(0, 0) == 1.0                # an even split caps at 1
    with pytest.raises(ValueError, match="wins"):
        sign_test(7, 6)


def test_chi_square() -> None:
    assert chi_square([10, 20, 30], [1, 2, 3]) == (0.0, 1.0)  # expected may be probabilities
    statistic, p = chi_square([12, 18, 30], [10, 20, 30])
    assert statistic == pytest.approx(0.4 + 0.2) and p == pytest.approx(math.exp(-0.3))
    assert chi_square([5, 1], [1, 0]) == (math.inf, 0.0)  # observed where the target has no mass
    assert chi_square([5, 0], [1, 0]) == (0.0, 1.0)  # empty zero-mass bins are dropped
    # bins expected 1, 2, 3 (< 5) are pooled into one bin expected 6, observed 9
    statistic, _ = chi_square([2, 3, 4, 41, 50], [1, 2, 3, 44, 50])
    assert statistic == pytest.approx((9 - 6) ** 2 / 6 + 3**2 / 44)
    counts = torch.tensor([3.0, 0.0, 1.0], device="cpu")
    assert chi_square(counts, counts)[1] == 1.0  # the pooled bin absorbs bins until it reaches 5: one bin left


# ---------------------------------------------------------------- the two acceptance rates, measured
class IIDDrafter:
    """A synthetic drafter: its token at each position equals the target's greedy token with probability alpha,
    independently per position (a fixed generator), else a different token. Built from the target's own
    greedy continuation, so E(alpha, k) is the exact expectation of tokens per verify."""

    def __new__(cls, *args, **kwargs):
        from tree_spec.drafters.base import Drafter

        class _IID(Drafter):
            def __init__(self, greedy: list[int], vocab: int, alpha: float, seed: int) -> None:
                super().__init__(vocab, "cpu")
                self.greedy, self.vocab, self.alpha = greedy, vocab, alpha
                self.generator = torch.Generator().manual_seed(seed)

            def reset(self, max_len: int) -> None:
                pass

            def next_logits(self, context, tokens, parents, frontier):
                self.calls += 1
                logits = torch.zeros(len(frontier), self.vocab, device="cpu")
                for row, node in enumerate(frontier):
                    depth, n = 0, node
                    while parents[n] != -1:
                        depth, n = depth + 1, parents[n]
                    truth = self.greedy[len(context) + depth + 1]  # the target's token after this node's path
                    hit = torch.rand(1, generator=self.generator, device="cpu").item() < self.alpha
                    shift = int(torch.randint(self.vocab - 1, (1,), generator=self.generator, device="cpu"))
                    other = (truth + 1 + shift) % self.vocab
                    logits[row, truth if hit else other] = 10.0
                return logits

        return _IID(*args, **kwargs)


def _iid_runs(alpha: float, k: int, n_prompts: int = 6, new_tokens: int = 200):
    from mini_llm import generate
    from tests.spec_models import prompts, random_model
    from tree_spec.decoding.chain import speculative_generate

    target = random_model(seed=11, max_position_embeddings=512)
    outs = []
    for i, prompt in enumerate(prompts(target.cfg.vocab_size, n_prompts, seed=3)):
        greedy = prompt + generate(target, torch.tensor([prompt], device="cpu"), new_tokens + k + 1)[0].tolist()
        drafter = IIDDrafter(greedy, target.cfg.vocab_size, alpha, seed=i)
        out = speculative_generate(target, drafter, prompt, new_tokens, k=k)
        assert out.tokens == greedy[len(prompt):len(prompt) + new_tokens]  # greedy identity
        outs.append(out)
    return outs


@pytest.mark.parametrize("alpha,k", [(0.6, 4), (0.85, 3)])
def test_e_of_the_per_position_rate_predicts_tau_on_an_iid_drafter(alpha, k) -> None:
    outs = _iid_runs(alpha, k)
    passes = sum(o.target_calls - 1 for o in outs)  # minus the prefills
    accepted = sum(sum(o.accepted_per_call) for o in outs)
    proposed = sum(o.proposed for o in outs)
    reached = sum(sum(o.reached_at_depth) for o in outs)
    tau_per_pass = 1 + accepted / passes
    per_position = accepted / reached  # pooled SpecOutput.alpha over the runs
    ratio = accepted / proposed  # pooled SpecOutput.acceptance_ratio
    # ~250 passes: the per-position estimate's standard error is about 0.02, so 0.06 is 3 of them
    assert per_position == pytest.approx(alpha, abs=0.06)
    assert tau_per_pass == pytest.approx(expected_tokens_per_verify(per_position, k), rel=0.10)
    assert tau_per_pass == pytest.approx(expected_tokens_per_verify(alpha, k), rel=0.10)
    # the other rate is not α: fed into E it underestimates τ by more than the tolerance
    assert ratio < per_position
    assert expected_tokens_per_verify(ratio, k) < 0.9 * tau_per_pass


def test_chain_tau_is_one_plus_k_times_the_acceptance_ratio() -> None:
    # live runs: exact per run, with the drafted tokens per pass (the last pass may be cut at the budget)
    for out in _iid_runs(0.7, 4, n_prompts=3, new_tokens=120):
        passes = out.target_calls - 1
        assert 1 + sum(out.accepted_per_call) / passes == pytest.approx(
            1 + out.proposed / passes * out.acceptance_ratio)
        # per-depth α products give the same tokens per pass, up to the passes shortened at the budget
        assert tau_from_alpha_at_depth(out.alpha_at_depth) == pytest.approx(1 + sum(out.accepted_per_call) / passes,
                                                                           rel=0.02)
    # recorded runs: every chain row of the committed benchmark, τ per pass vs 1 + k · ratio
    bench = json.loads((Path(__file__).resolve().parent.parent / "models" / "benchmark.json").read_text())
    chains = [r for r in bench["rows"] if r["form"].startswith("chain k=") and r.get("acceptance_ratio")]
    assert chains, "the recorded benchmark has chain rows with an acceptance ratio"
    for r in chains:
        k = int(r["form"].split("k=")[1].split()[0])
        passes = r["target_calls"] - bench["prompts"]
        tau_per_pass = (r["tokens"] - bench["prompts"]) / passes
        # the last pass of each prompt may draft fewer than k (token budget): at most 1 pass in ~30 per prompt
        assert tau_per_pass == pytest.approx(tau_from_acceptance_ratio(r["acceptance_ratio"], k), rel=0.03)


def test_tau_helpers() -> None:
    assert tau_from_alpha_at_depth([0.8] * 4) == pytest.approx(expected_tokens_per_verify(0.8, 4))
    assert tau_from_alpha_at_depth([0.9, 0.5]) == pytest.approx(1 + 0.9 + 0.45)
    assert tau_from_acceptance_ratio(0.5, 4) == 3.0
    with pytest.raises(ValueError):
        tau_from_acceptance_ratio(1.5, 4)
