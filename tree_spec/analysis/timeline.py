"""A measured timeline of one generation: when each target forward and each drafter call ran, and what it committed.

For notebook 01's Gantt chart (`tree_spec.plots.draw_timeline`): plain decoding is one target forward per
token; a speculative step is k drafter calls followed by one verify forward that commits τ tokens.

    plain = record_plain(target, prompt_ids, 32)
    spec = record_speculative(target, drafter, prompt_ids, 32, k=4)
    draw_timeline(plain, spec)

Times are this thread's CPU time (`time.thread_time()`) with one torch thread, so the time other processes run is
not counted (they can still slow this thread through shared caches and memory bandwidth, so bars vary run to run);
on CUDA, wall time after a synchronize. Time not covered by a bar is the loop's own
Python bookkeeping.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from mini_llm import Transformer, generate

from .chain import speculative_generate
from .costs import one_thread
from .drafters import Drafter, as_drafter
from .output import SpecOutput


@dataclass
class Span:
    """One timed call. kind: "prefill", "decode", "draft" or "verify"; start_ms / ms: offset from the run's start
    and duration; tokens: tokens this call committed (decode 1, verify = accepted drafts + 1, draft 0)."""

    kind: str
    start_ms: float
    ms: float
    tokens: int = 0


@dataclass
class Timeline:
    """The spans of one generation, in order, the generated tokens, and (speculative runs) the SpecOutput."""

    label: str
    spans: list[Span] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    output: SpecOutput | None = None

    def mean_ms(self, kind: str) -> float:
        """Mean duration of the spans of one kind (0.0 when there are none)."""
        times = [s.ms for s in self.spans if s.kind == kind]
        return sum(times) / len(times) if times else 0.0

    @property
    def committing(self) -> list[Span]:
        """The spans that commit tokens after the prefill (decode steps, or verify passes)."""
        return [s for s in self.spans if s.kind in ("decode", "verify")]

    @property
    def elapsed_ms(self) -> float:
        """ms from the end of the prefill to the end of the last call (bars and the gaps between them)."""
        prefill_end = next((s.start_ms + s.ms for s in self.spans if s.kind == "prefill"), 0.0)
        return self.spans[-1].start_ms + self.spans[-1].ms - prefill_end

    @property
    def committed(self) -> int:
        """Tokens committed after the prefill."""
        return sum(s.tokens for s in self.committing)

    def ms_per_token(self) -> float:
        """elapsed_ms / committed: the measured time per token after the prefill, loop overhead included."""
        return self.elapsed_ms / self.committed


def pooled(timelines: Sequence[Timeline], kind: str | None = None) -> tuple[float, int]:
    """(total ms, count) over several timelines: of the spans of one kind, or (kind None) elapsed ms and tokens."""
    if kind is None:
        return sum(t.elapsed_ms for t in timelines), sum(t.committed for t in timelines)
    spans = [s for t in timelines for s in t.spans if s.kind == kind]
    return sum(s.ms for s in spans), len(spans)


def _clock(device: torch.device) -> Callable[[], float]:
    """ms now: thread CPU time on the CPU, wall time after a synchronize on CUDA."""
    if device.type == "cuda":
        return lambda: (torch.cuda.synchronize(device), 1000 * time.perf_counter())[1]
    return lambda: 1000 * time.thread_time()


@contextmanager
def _timed(obj: object, method: str, kind: Callable[[], str], spans: list[Span], clock, t0: list[float]) -> Iterator[None]:
    """Inside the block, every call of obj.method appends a Span (kind() names it); restored on exit."""
    original = getattr(obj, method)

    def timed(*args, **kwargs):
        start = clock()
        try:
            return original(*args, **kwargs)
        finally:
            spans.append(Span(kind(), start - t0[0], clock() - start))

    setattr(obj, method, timed)
    try:
        yield
    finally:
        delattr(obj, method)  # back to the class's method


def record_plain(target: Transformer, prompt_ids: Sequence[int], max_new_tokens: int) -> Timeline:
    """Greedy `generate` with every target forward timed (the first is the prefill; each later one commits 1 token)."""
    spans: list[Span] = []
    clock, t0 = _clock(target.device), [0.0]
    kind = lambda: "decode" if spans else "prefill"  # noqa: E731
    with one_thread(), _timed(target, "forward", kind, spans, clock, t0):
        t0[0] = clock()
        tokens = generate(target, torch.tensor([list(prompt_ids)], device=target.device), max_new_tokens)[0].tolist()
    for span in spans[1:]:
        span.tokens = 1
    return Timeline("plain decoding", spans, tokens)


def record_speculative(
    target: Transformer, drafter: Drafter | Transformer, prompt_ids: Sequence[int], max_new_tokens: int, k: int
) -> Timeline:
    """Greedy `speculative_generate` with every target forward and every drafter call (`next_logits`) timed.

    Each verify span carries the tokens that pass committed (accepted drafts + the target's token).
    """
    drafter = as_drafter(drafter)
    spans: list[Span] = []
    clock, t0 = _clock(target.device), [0.0]
    target_kind = lambda: "verify" if any(s.kind == "prefill" for s in spans) else "prefill"  # noqa: E731
    with one_thread(), _timed(target, "forward", target_kind, spans, clock, t0), \
            _timed(drafter, "next_logits", lambda: "draft", spans, clock, t0):
        t0[0] = clock()
        out = speculative_generate(target, drafter, list(prompt_ids), max_new_tokens, k=k)
    verifies = [s for s in spans if s.kind == "verify"]
    if len(verifies) != len(out.accepted_per_call):
        raise RuntimeError(f"{len(verifies)} verify forwards timed, {len(out.accepted_per_call)} recorded")
    for span, accepted in zip(verifies, out.accepted_per_call):
        span.tokens = accepted + 1
    return Timeline(f"speculative, k = {k}", spans, out.tokens, out)
