"""Choosing a tree shape: every per-level branching list scored by predicted ms per token, then the best
validated by real runs against plain greedy (interleaved, one thread, thread CPU time).

Score = (verify(nodes + 1) + Σ_levels draft + overhead) / tokens per pass (`StepCosts`, `RankProfile`).
`tree_speculative_generate` takes a per-level `branching`, so general (non-uniform) trees are not searched:
Sequoia's dynamic program over general trees would need a verifier that takes any parents list.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import torch

from mini_llm import Transformer, generate

from ..analysis.clocks import one_thread
from ..analysis.ranks import RankProfile
from ..analysis.tuned import CONFIDENCE_STOP
from ..core.output import SpecOutput
from ..core.topology import tree_node_count
from ..decoding.chain import speculative_generate
from ..decoding.tree import tree_speculative_generate
from ..drafters.base import Drafter
from .step_costs import StepCosts

# a validated shape replaces the benchmark's fixed one only when it is this much faster: two validation
# runs of the same shape on this shared 2-core machine differ by a few percent
MARGIN = 0.04
THETAS = (0.1, 0.2, 0.3, 0.4, 0.5)  # confidence-stop thresholds tried for recurrent heads
# caps on a confidence-stopped chain tried with every θ: a confident draft may run past the fixed chains' depth
CONFIDENCE_KS = (4, 6, 8, 12)
CONFIDENCE_DRAFTERS = ("eagle", "eagle3", "mtp")  # drafters that pay one call per draft depth
FINALISTS = 4  # the fastest of a sweep timed again, apart, beside the setting kept by default, before the pick

# the benchmark's fixed-shape rows per drafter (branching lists; [1] * k is a chain): validated beside the
# search's best, and kept unless beaten by MARGIN. EAGLE-3's benchmark row is EAGLE-2's dynamic tree, not a shape.
FIXED_SHAPES = {
    "small-model": [[1, 1, 1, 1], [2, 2, 1, 1]],
    "int4-self": [[2, 2, 1, 1]],
    "medusa": [[3, 2, 2, 1]],
    "eagle": [[3, 2, 1, 1, 1]],
    "eagle3": [],
    "mtp": [[1, 1, 1, 1]],
}
# more shapes always validated: the short chain (k = 3) of the model drafters
ALSO_VALIDATED = {"eagle": [[1, 1, 1]], "eagle3": [[1, 1, 1], [3, 2, 1, 1, 1]], "mtp": [[1, 1, 1]]}


def branching_lists(max_depth: int, max_width: int, max_nodes: int) -> list[list[int]]:
    """Every per-level branching list with widths 1..max_width, 1..max_depth levels and <= max_nodes nodes."""
    out: list[list[int]] = []

    def grow(prefix: list[int], nodes: int, frontier: int) -> None:
        for w in range(1, max_width + 1):
            if nodes + frontier * w > max_nodes:
                break
            shape = prefix + [w]
            out.append(shape)
            if len(shape) < max_depth:
                grow(shape, nodes + frontier * w, frontier * w)

    grow([], 0, 1)
    return out


def rank_shapes(
    profile: RankProfile, costs: StepCosts, max_width: int = 4, max_nodes: int = 63,
    include: Sequence[Sequence[int]] = (),
) -> list[dict]:
    """Every branching list (plus `include`) with its predicted tokens per pass, step ms and ms per token,
    fastest first."""
    shapes = branching_lists(profile.depth, min(max_width, profile.max_rank), max_nodes)
    shapes += [list(s) for s in include if list(s) not in shapes and len(s) <= profile.depth]
    reach = profile.reach_many(shapes)
    rows = []
    for shape, r in zip(shapes, reach):
        tokens = 1.0 + float(r.sum())
        step = costs.step_ms(shape)
        rows.append(dict(branching=shape, nodes=tree_node_count(shape), tokens_per_pass=tokens, **{f"{k}_ms": v for k, v in step.items()},
                         ms_per_token=step["total"] / tokens, speedup=costs.plain_ms_per_token / (step["total"] / tokens)))
    rows.sort(key=lambda row: row["ms_per_token"])
    return rows


def shape_text(branching: Sequence[int]) -> str:
    """"chain k=4" or "tree [2, 2, 1, 1]"."""
    return f"chain k={len(branching)}" if all(w == 1 for w in branching) else f"tree {list(branching)}"


@torch.inference_mode()
def run_shape(target: Transformer, drafter: Drafter, prompt: Sequence[int], new_tokens: int, branching: Sequence[int]):
    """One greedy run with `branching`: all-ones shapes through the chain decoder (as the benchmark runs them)."""
    if all(w == 1 for w in branching):
        return speculative_generate(target, drafter, prompt, new_tokens, k=len(branching))
    return tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(branching))


def interleaved_runs(
    target: Transformer, runs: Sequence[tuple[str, Callable[[list[int]], SpecOutput]]],
    prompts: Sequence[Sequence[int]], new_tokens: int, rounds: int = 2,
) -> list[dict]:
    """Plain greedy and each named run(prompt) -> SpecOutput on every prompt, interleaved, `rounds` times (the
    runs' order reversed every other round), one thread, thread CPU time -> per run {ms_per_token, tau, speedup,
    plain_ms_per_token}. Raises when a run's tokens differ from plain greedy."""
    totals = [[0.0, 0, 0] for _ in range(len(runs) + 1)]  # ms, tokens, target calls; the last: plain
    order = list(enumerate(runs))
    with one_thread():
        for r in range(rounds):
            for prompt in prompts:
                t = time.thread_time()
                out = generate(target, torch.tensor([list(prompt)], device=target.device), new_tokens)[0].tolist()
                totals[-1][0] += 1000 * (time.thread_time() - t)
                totals[-1][1] += len(out)
                for i, (label, run) in (order if r % 2 == 0 else order[::-1]):
                    t = time.thread_time()
                    spec = run(list(prompt))
                    totals[i][0] += 1000 * (time.thread_time() - t)
                    totals[i][1] += len(spec.tokens)
                    totals[i][2] += spec.target_calls
                    if spec.tokens != out:
                        raise AssertionError(f"{label}: output differs from plain greedy")
    plain = totals[-1][0] / totals[-1][1]
    return [dict(ms_per_token=ms / n, tau=n / calls, speedup=plain / (ms / n), plain_ms_per_token=plain)
            for ms, n, calls in totals[:-1]]


def validate(
    target: Transformer, drafters: dict[str, Drafter], candidates: list[tuple[str, list[int]]],
    prompts: Sequence[Sequence[int]], new_tokens: int, rounds: int = 2,
) -> list[dict]:
    """Each (drafter key, branching) against plain greedy (`interleaved_runs`); thread ms per token."""
    runs = [(f"{key} {shape}", lambda p, key=key, shape=shape: run_shape(target, drafters[key], p, new_tokens, shape))
            for key, shape in candidates]
    measured = interleaved_runs(target, runs, prompts, new_tokens, rounds)
    return [dict(vocab=key, branching=shape, **m) for (key, shape), m in zip(candidates, measured)]


def tune_confidence_stop(
    target: Transformer, drafter: Drafter, prompts: Sequence[Sequence[int]], new_tokens: int,
    ks: Sequence[int] = CONFIDENCE_KS, thetas: Sequence[float] = THETAS, rounds: int = 2, margin: float = MARGIN,
    finalists: int = FINALISTS,
) -> dict:
    """Confidence-stopped chains, every cap k of `ks` with every θ of `thetas` (and the benchmark's default pair,
    `CONFIDENCE_STOP`), against plain greedy (`interleaved_runs`); then the default and the `finalists` fastest once
    more, in a run of their own (`finalist_indices`) -> {k, min_path_prob, measured, confirmed}: the fastest pair of
    that second run, or the default when the fastest beats it by less than `margin` (`choose_stop`)."""
    default = (CONFIDENCE_STOP["k"], CONFIDENCE_STOP["min_path_prob"])
    pairs = sorted({*itertools.product(ks, thetas), default})
    runs = [(f"confidence stop k={k} θ={theta}",
             lambda p, k=k, theta=theta: speculative_generate(target, drafter, p, new_tokens, k=k, min_path_prob=theta))
            for k, theta in pairs]
    measured = [dict(k=k, min_path_prob=theta, **m)
                for (k, theta), m in zip(pairs, interleaved_runs(target, runs, prompts, new_tokens, rounds))]
    final = finalist_indices(measured, pairs.index(default), finalists)
    confirmed = [dict(measured[i], **m)
                 for i, m in zip(final, interleaved_runs(target, [runs[i] for i in final], prompts, new_tokens, rounds))]
    k, theta = choose_stop(confirmed, default, margin)
    return dict(k=k, min_path_prob=theta, measured=measured, confirmed=confirmed)


def finalist_indices(measured: Sequence[dict], kept: int, finalists: int = FINALISTS) -> list[int]:
    """Which rows of a sweep to time again, apart, before a pick: `kept` (the setting kept unless clearly beaten)
    first, then the `finalists` fastest others. The fastest of dozens of noisy runs is partly the luckiest; timing
    it and its few rivals again in a run of their own leaves that luck behind."""
    others = sorted((i for i in range(len(measured)) if i != kept), key=lambda i: measured[i]["ms_per_token"])
    return [kept, *others[:finalists]]


def print_runs(rows: Sequence[dict], label: Callable[[dict], str]) -> None:
    """One line per measured run, fastest first: label(row), then τ, ms per token and speedup over plain greedy."""
    for m in sorted(rows, key=lambda m: m["ms_per_token"]):
        print(f"  {label(m)}: tau {m['tau']:.2f}, {m['ms_per_token']:.3f} ms/token, {m['speedup']:.2f}x plain")


def fastest_unless_close(measured: Sequence[dict], kept: dict, margin: float = MARGIN) -> dict:
    """The fastest of the `measured` rows, unless it beats `kept` (one of them: the default, the fixed setting) by
    less than `margin`; then `kept` (a run-to-run difference is not a better setting)."""
    best = min(measured, key=lambda m: m["ms_per_token"])
    return best if best["ms_per_token"] < (1 - margin) * kept["ms_per_token"] else kept


def choose_stop(measured: list[dict], default: tuple[int, float], margin: float = MARGIN) -> tuple[int, float]:
    """(k, θ) of the fastest measured confidence stop, unless it beats the `default` pair's run by less than
    `margin` (then the default)."""
    kept = next(m for m in measured if (m["k"], m["min_path_prob"]) == tuple(default))
    pick = fastest_unless_close(measured, kept, margin)
    return pick["k"], pick["min_path_prob"]


def kept_shape(measured: Sequence[dict], fixed: Sequence[Sequence[int]]) -> dict:
    """The validation row kept unless clearly beaten: the fastest benchmark fixed shape (full vocabulary), or the
    fastest row when no fixed shape was measured."""
    fixed_rows = [m for m in measured if m["vocab"] is None and list(m["branching"]) in [list(s) for s in fixed]]
    return min(fixed_rows or measured, key=lambda m: m["ms_per_token"])


def choose(measured: list[dict], fixed: Sequence[Sequence[int]], margin: float = MARGIN) -> dict:
    """The validation row to save: the fastest, unless it is not a benchmark fixed shape and beats the fastest
    fixed shape (full vocabulary, `kept_shape`) by less than `margin`; then that fixed shape (a run-to-run
    difference is not a better tree)."""
    return fastest_unless_close(measured, kept_shape(measured, fixed), margin)
