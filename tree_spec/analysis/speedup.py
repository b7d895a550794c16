"""The speedup math: expected tokens per verify, wall time, break-even points, trees, a roofline batch
table and tail latency.

Notation (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"): k = draft tokens per step; c = the cost of one draft token relative to one target
forward; verify_overhead = the extra cost of a verify pass relative to a plain decode step. Two acceptance
rates, never one symbol for both:
- alpha (α) = the per-position acceptance rate: P(draft token at depth d accepted | every earlier one was).
  Every `alpha` argument below is this rate; it is the α of E = (1 − α^(k+1)) / (1 − α).
- the acceptance ratio = accepted / proposed draft tokens (vLLM's counter, `SpecOutput.acceptance_ratio`).
  For a chain, tokens per verify τ = 1 + k · ratio exactly (`tau_from_acceptance_ratio`); putting the ratio
  into E(α, k) underestimates τ. `production_speedup` and `break_even_acceptance_ratio` take / return the ratio;
  `chain_break_even_alpha` returns the per-position α.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from collections.abc import Callable
from typing import NamedTuple

import torch

from ..core.contracts import check_k
from ..core.topology import tree_node_count


def _check_alpha_k(alpha: float, k: int) -> None:
    if not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def expected_tokens_per_verify(alpha: float, k: int) -> float:
    """E = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha); k + 1 at alpha = 1.

    Tokens committed per target pass, counting the bonus/correction token (τ), when
    each draft token is accepted with the same per-position rate alpha (given the earlier ones were).
    3.36 at alpha 0.8, k 4. alpha must be the per-position rate, not the acceptance ratio.
    """
    _check_alpha_k(alpha, k)
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def tau_from_alpha_at_depth(alpha_at_depth: Sequence[float]) -> float:
    """Tokens per verify of a chain from per-depth rates: 1 + α1 + α1·α2 + ... (`SpecOutput.alpha_at_depth`).

    With one α at every depth this is expected_tokens_per_verify(α, k).
    """
    tau, reach = 1.0, 1.0
    for alpha in alpha_at_depth:
        if not 0 <= alpha <= 1:
            raise ValueError(f"every alpha must be in [0, 1], got {list(alpha_at_depth)}")
        reach *= alpha
        tau += reach
    return tau


def tau_from_acceptance_ratio(acceptance_ratio: float, k: int) -> float:
    """Tokens per verify of a chain of k drafts from the acceptance ratio (accepted / proposed): 1 + k · ratio.

    Exact when every pass drafts k tokens (k · ratio is the mean accepted per pass). Not E(ratio, k).
    """
    if not 0 <= acceptance_ratio <= 1:
        raise ValueError(f"acceptance_ratio must be in [0, 1], got {acceptance_ratio}")
    return 1 + k * acceptance_ratio


def wall_time_per_token(alpha: float, k: int, c: float) -> float:
    """(k * c + 1) / E, in units of one target forward: k draft passes plus one verify, per E tokens."""
    return (k * c + 1) / expected_tokens_per_verify(alpha, k)


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """1 / wall_time_per_token = E / (k * c + 1): the speedup over plain decoding (1 token per forward)."""
    return 1 / wall_time_per_token(alpha, k, c)


def production_speedup(acceptance_ratio: float, k: int, verify_overhead: float) -> float:
    """S = (1 + k * ratio) / (1 + verify_overhead): the speedup from counters an engine exports.

    1 + k * ratio is exactly the tokens per step when ratio is the acceptance ratio (accepted / proposed,
    what an engine exports). Fed the per-position α instead, it is only an upper bound on E(α, k).
    verify_overhead is the verify pass's extra cost (drafting included) over one decode step.
    """
    if not 0 <= acceptance_ratio <= 1:
        raise ValueError(f"acceptance_ratio must be in [0, 1], got {acceptance_ratio}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return (1 + k * acceptance_ratio) / (1 + verify_overhead)


def break_even_acceptance_ratio(verify_overhead: float, k: int) -> float:
    """The acceptance ratio (accepted / proposed) at which production_speedup = 1: 1 + k * ratio =
    1 + verify_overhead -> verify_overhead / k. (The per-position α at break-even solves
    E(α, k) = 1 + verify_overhead instead: `chain_break_even_alpha`.)

    verify_overhead grows with concurrency (compute saturates), so the break-even ratio rises too.
    """
    return verify_overhead / check_k(k)


def break_even(speedup: Callable[[float], float]) -> float | None:
    """The alpha in [0, 1] where a speedup that rises with alpha reaches 1 (bisection); None if it never does."""
    if speedup(1.0) < 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if speedup(mid) < 1 else (lo, mid)
    return (lo + hi) / 2


def chain_break_even_alpha(k: int, c: float) -> float | None:
    """The per-position alpha at which expected_speedup(alpha, k, c) = 1, i.e. E(alpha, k) = k * c + 1;
    None if c >= 1. (In acceptance-ratio units the same point is c, from 1 + k * ratio = k * c + 1.)

    E rises monotonically from 1 (alpha = 0) to k + 1 (alpha = 1), so bisection finds the root.
    """
    check_k(k)
    if c >= 1:
        return None
    return break_even(lambda alpha: expected_speedup(alpha, k, c))


def tree_verify_tokens(branching: Sequence[int], batch: int = 1) -> int:
    """Tokens the target processes per verify step: batch * (tree_node_count + 1 for the root).

    [2, 2, 1, 1] at batch 64 -> 960, [3, 3, 2] -> 1984: near compute-bound on a 7B model (see
    roofline_step_time), where a narrow tree, a chain or no speculation is the better choice.
    """
    return batch * (tree_node_count(branching) + 1)


def tree_expected_tokens(branching: Sequence[int], hit_rate: float) -> float:
    """Expected tokens per verify for a tree: 1 + sum_l prod_{j <= l} (1 - (1 - hit_rate)^w_j).

    Model: at level l, each of the w_l candidates under the accepted node independently matches the
    target's token with probability hit_rate, so the level is passed with probability
    1 - (1 - hit_rate)^w_l; the walk stops at the first failed level; +1 for the target's own token.
    A chain (all w = 1) gives expected_tokens_per_verify(hit_rate, len(branching)).
    Caveat: the w candidates are alternatives of one draft distribution (at most one can match), so
    independence overstates what width buys; a measured rank profile (the chance that the target's token
    is the draft's rank-r candidate) gives the honest level pass rate, the sum of its top-w entries.
    """
    if not 0 <= hit_rate <= 1:
        raise ValueError(f"hit_rate must be in [0, 1], got {hit_rate}")
    tree_node_count(branching)  # validates the branching factors
    expected, reach = 1.0, 1.0
    for w in branching:
        reach *= 1 - (1 - hit_rate) ** w
        expected += reach
    return expected


@dataclass(frozen=True)
class Roofline:
    """A model on a GPU; defaults: Qwen2.5-7B (bf16) on an H100 (3.35 TB/s, 989 dense bf16 TFLOP/s).

    kv_bytes_per_token = 28 layers * 2 (K, V) * 4 KV heads * 128 dims * 2 bytes = 57,344. A worked example,
    not a measurement: where each input comes from is in the README's Reference figures table.
    """

    params: float = 7.6e9
    weight_bytes: float = 15.2e9
    kv_bytes_per_token: float = 57_344
    bandwidth: float = 3.35e12  # bytes / s
    peak_flops: float = 989e12  # FLOP / s (dense bf16)
    efficiency: float = 0.6  # achieved fraction of peak_flops
    fixed_s: float = 0.3e-3  # per-step overhead (launches, sampling, scheduling)


def roofline_step_time(batch: int, tokens_per_seq: int = 1, context: int = 1024, hw: Roofline = Roofline()) -> float:
    """Seconds for one forward over batch sequences of `context` cached tokens, tokens_per_seq new each.

    t = max(bytes / bandwidth, flops / (peak_flops * efficiency)) + fixed_s, with
    bytes = weight_bytes + batch * context * kv_bytes_per_token (weights read once per step, each
    sequence's KV read once) and flops = 2 * params * batch * tokens_per_seq. Assumes memory and
    compute overlap perfectly and ignores attention FLOPs and the new tokens' KV writes.
    Decode: tokens_per_seq = 1; chain verify: k + 1.
    """
    bytes_moved = hw.weight_bytes + batch * context * hw.kv_bytes_per_token
    flops = 2 * hw.params * batch * tokens_per_seq
    return max(bytes_moved / hw.bandwidth, flops / (hw.peak_flops * hw.efficiency)) + hw.fixed_s


class SpeedupRow(NamedTuple):
    batch: int
    decode_ms: float
    verify_ms: float
    speedup: float


def speedup_table(
    batches: Sequence[int] = (1, 4, 16, 64, 128, 256),
    alpha: float = 0.8,  # the per-position rate
    k: int = 4,
    draft_cost: float = 0.05,
    context: int = 1024,
    hw: Roofline = Roofline(),
) -> list[SpeedupRow]:
    """Speculative vs plain decoding per batch size, from roofline_step_time.

    speedup = E * decode / (verify + k * draft_cost * decode), with E = expected_tokens_per_verify,
    decode = step time with 1 token per sequence, verify = step time with k + 1 tokens per sequence,
    and each draft token costing draft_cost decode steps. The defaults give:
    batch 1/4/16/64/128/256 -> decode 4.85/4.91/5.12/5.96/7.08/9.32 ms, verify 4.85/4.91/5.12/8.50/
    16.69/33.09 ms, speedup 2.80/2.80/2.80/2.07/1.31/0.90.
    """
    tokens = expected_tokens_per_verify(alpha, k)
    rows = []
    for b in batches:
        decode = roofline_step_time(b, 1, context, hw)
        verify = roofline_step_time(b, k + 1, context, hw)
        rows.append(SpeedupRow(b, decode * 1e3, verify * 1e3, tokens * decode / (verify + k * draft_cost * decode)))
    return rows


class TailLatency(NamedTuple):
    plain_itl: torch.Tensor  # [n_tokens] inter-token latency of plain decoding
    spec_itl: torch.Tensor  # [n_tokens] inter-token latency with speculation
    plain_mean: float
    plain_p99: float
    spec_mean: float
    spec_p99: float


def simulate_tail(alpha: float, k: int, c: float, n_tokens: int = 1000, seed: int = 0) -> TailLatency:
    """Inter-token latency (ITL) with and without speculation, in units of one target forward.

    Plain decoding: every token takes 1. Speculation: a step costs k * c + 1 and emits
    n_accepted + 1 tokens (each draft accepted with the per-position rate alpha, until the first
    rejection) in one burst: the step's first token gets ITL = step time, the rest ITL = 0 (they
    arrive together). The mean ITL drops to ~wall_time_per_token, but the P99 is the full step time,
    above plain decoding's 1: watch the tail, not only the mean.
    """
    _check_alpha_k(alpha, k)
    generator = torch.Generator().manual_seed(seed)
    accepted = (torch.rand(n_tokens, k, generator=generator, device="cpu") < alpha).cumprod(-1).sum(-1)  # [steps]
    emitted = accepted + 1
    starts = emitted.cumsum(0) - emitted
    starts = starts[starts < n_tokens]
    spec = torch.zeros(n_tokens, device="cpu")
    spec[starts] = k * c + 1
    plain = torch.ones(n_tokens, device="cpu")
    return TailLatency(
        plain, spec, plain.mean().item(), plain.quantile(0.99).item(), spec.mean().item(), spec.quantile(0.99).item()
    )



