"""Batch-size sweeps: plain `generate_batch` against batched chain speculation at every B, timed by part."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from tqdm import tqdm  # the plain bar: disable=None turns it off where output is not a terminal (notebooks)

from mini_llm import Transformer
from mini_llm.batch import generate_batch

from ..decoding.batch import batch_speculative_generate
from ..drafters.base import Drafter
from ..drafters.batch import as_batch_drafter
from .timing import TimeSplit, time_split


@dataclass
class BatchPoint:
    """One batch size of `batch_sweep`: plain and speculative runs over the same prompts, end to end."""

    batch: int
    rows: int              # prompts decoded at this B (the same ones at every B), in batches of `batch`
    plain_tokens: int
    plain_seconds: float
    spec_tokens: int
    spec_seconds: float
    target_calls: int      # speculative verify passes + prefill, summed over rows
    proposed: int          # draft tokens sent to the target, summed over rows
    accepted: int          # of which accepted
    identical: bool        # greedy: every speculative row equals its plain row
    plain_time: TimeSplit | None = None   # where the kept plain run's time went (summed over its batches)
    spec_time: TimeSplit | None = None    # the same for the kept speculative run
    plain_ms_rounds: tuple[float, ...] = ()   # the plain run's total ms in every round (the kept one is the least)
    spec_ms_rounds: tuple[float, ...] = ()

    @property
    def plain_tps(self) -> float:
        """Plain `generate_batch` tokens per second over all rows, prefill included."""
        return self.plain_tokens / self.plain_seconds

    @property
    def spec_tps(self) -> float:
        """Batched speculative tokens per second over all rows, prefill and drafting included."""
        return self.spec_tokens / self.spec_seconds

    @property
    def speedup(self) -> float:
        """Speculative tokens/s over plain tokens/s at this batch size."""
        return self.spec_tps / self.plain_tps

    @property
    def slower_beyond_noise(self) -> bool:
        """Speculation is slower than plain decoding even when its fastest round is set against plain's slowest
        (with one round each: speedup < 1)."""
        spec_ms = min(self.spec_ms_rounds, default=1000 * self.spec_seconds)
        plain_ms = max(self.plain_ms_rounds, default=1000 * self.plain_seconds)
        return spec_ms / self.spec_tokens > plain_ms / self.plain_tokens

    @property
    def tau(self) -> float:
        """Tokens per target call per row, counting the target's own token (and the prefill call)."""
        return self.spec_tokens / self.target_calls

    @property
    def acceptance_ratio(self) -> float:
        """Accepted / proposed draft tokens (vLLM's counter, not the per-position α)."""
        return self.accepted / self.proposed if self.proposed else 0.0


def batch_sweep(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompts: Sequence[Sequence[int]],
    batches: Sequence[int],
    max_new_tokens: int,
    k: int = 4,
    repeats: int = 1,
) -> list[BatchPoint]:
    """`batch_sweeps` for one drafter."""
    return batch_sweeps(target, {"": drafter}, prompts, batches, max_new_tokens, k, repeats)[""]


def batch_sweeps(
    target: Transformer,
    drafters: Mapping[str, Drafter | Transformer],
    prompts: Sequence[Sequence[int]],
    batches: Sequence[int],
    max_new_tokens: int,
    k: int = 4,
    repeats: int = 1,
) -> dict[str, list[BatchPoint]]:
    """Greedy tokens per second of `generate_batch` and of `batch_speculative_generate` with each drafter, at
    each batch size B: tokens generated / time of the calls, prefill included -> {drafter name: [BatchPoint]}.

    Every B decodes the same rows: all the prompts, in consecutive batches of B (the last may be smaller),
    cycled to fill one batch when B > len(prompts). So the rows' content, and with it τ, is the same at
    every B, and the speedup curve shows the batch size alone. The plain run is shared by the drafters. Time is
    the thread's CPU time on a CPU (run torch with one thread: the time other processes run then does not count,
    though they still slow this thread through shared caches), synchronized wall time on CUDA, split into
    prefill, forwards, drafting and the rest (`timing.time_split`). `repeats` rounds each time every B once, plain
    and each drafter in an order that rotates round by round (so a machine that drifts favours none of them);
    each run keeps its fastest round (noise on a shared machine only adds time).
    """
    draft_by_name = {name: as_batch_drafter(d) for name, d in drafters.items()}
    sizes = list(batches)
    best: dict[tuple[str | None, int], tuple[list, TimeSplit]] = {}   # (drafter or None for plain, B) -> fastest
    rounds: dict[tuple[str | None, int], list[float]] = {}            # the same key -> total ms of every round

    def keep(key, result, split):
        rounds.setdefault(key, []).append(split.total_ms)
        if key not in best or split.total_ms < best[key][1].total_ms:
            best[key] = (result, split)

    def run_chunks(chunks, fn):
        results, total = [], TimeSplit()
        for chunk in chunks:
            out, split = time_split(lambda trace: fn(chunk, trace), target)
            results += out
            total += split
        return results, total

    runs = [None, *draft_by_name]   # None: plain
    bar = tqdm(total=repeats * len(sizes) * len(runs), desc="batch sweep", unit="run", disable=None)
    for r in range(repeats):
        for B in sizes:
            rows = [list(prompts[i % len(prompts)]) for i in range(max(B, len(prompts)))]
            chunks = [rows[i:i + B] for i in range(0, len(rows), B)]
            for name in runs[r % len(runs):] + runs[:r % len(runs)]:
                if name is None:
                    keep((None, B), *run_chunks(chunks, lambda c, trace: generate_batch(target, c, max_new_tokens)))
                else:
                    draft = draft_by_name[name]
                    keep((name, B), *run_chunks(chunks, lambda c, trace: batch_speculative_generate(
                        target, draft, c, max_new_tokens, k=k, trace=trace)))
                bar.update()
    bar.close()
    points = {}
    for name in draft_by_name:
        points[name] = []
        for B in sizes:
            (plain, plain_time), (outs, spec_time) = best[(None, B)], best[(name, B)]
            points[name].append(BatchPoint(
                B, len(plain), sum(map(len, plain)), plain_time.total_ms / 1000, sum(len(o.tokens) for o in outs),
                spec_time.total_ms / 1000, sum(o.target_calls for o in outs), sum(o.proposed for o in outs),
                sum(sum(o.accepted_per_call) for o in outs), [o.tokens for o in outs] == plain, plain_time, spec_time,
                tuple(rounds[(None, B)]), tuple(rounds[(name, B)]),
            ))
    return points


def plain_scaling(points: Sequence[BatchPoint]) -> dict[int, float]:
    """Plain `generate_batch` tokens/s at each batch size over its tokens/s at the first (B = 1): how much
    the baseline itself gains from batching (a fair batch baseline gains several times by B = 8)."""
    return {p.batch: p.plain_tps / points[0].plain_tps for p in points}


def crossover(points: Sequence[BatchPoint]) -> int | None:
    """The smallest measured batch size from which speculation stays slower than plain decoding beyond the spread
    of the rounds (`BatchPoint.slower_beyond_noise`, points in batch order); None if the last point is not. A
    single dip followed by a win is timing noise, not a crossover."""
    crossing = None
    for p in points:
        crossing = (crossing or p.batch) if p.slower_beyond_noise else None
    return crossing


def batch_table(points_by_drafter: dict[str, list[BatchPoint]]) -> str:
    """A markdown table: one row per (drafter, B) with plain and speculative tokens/s and the speedup."""
    lines = ["| drafter | B | plain tok/s | spec tok/s | speedup | τ (tokens/call) | acceptance ratio | identical |",
             "|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for name, points in points_by_drafter.items():
        for p in points:
            lines.append(f"| {name} | {p.batch} | {p.plain_tps:.0f} | {p.spec_tps:.0f} | {p.speedup:.2f}× | "
                         f"{p.tau:.2f} | {p.acceptance_ratio:.2f} | {'yes' if p.identical else 'NO'} |")
        cross = crossover(points)
        lines.append(f"| {name}: slower from (beyond the rounds' spread) | {cross if cross else 'none'} | | | | | | |")
    return "\n".join(lines)

