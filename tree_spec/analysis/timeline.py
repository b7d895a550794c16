"""A measured timeline of one generation: when each target forward and each drafter call ran, and what it committed.

For a Gantt chart (`tree_spec.ui.plots.draw_timeline`): plain decoding is one target forward per
token; a speculative step is k drafter calls followed by one verify forward that commits τ tokens.

    plain = record_plain(target, prompt_ids, 32)
    spec = record_speculative(target, drafter, prompt_ids, 32, k=4)
    draw_timeline(plain, spec)

Times are `device_clock` with one torch thread: this thread's CPU time, so the time other processes run is not
counted (they can still slow this thread through shared caches and memory bandwidth, so bars vary run to run);
on CUDA, wall time after a synchronize. Time not covered by a bar is the loop's own
Python bookkeeping.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from mini_llm import Transformer, generate

from ..decoding.chain import speculative_generate
from .clocks import one_thread
from ..drafters.base import Drafter
from ..drafters.model import as_drafter
from ..core.output import SpecOutput
from .trace import RecordingTrace, forward_spans


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


def _spans(trace: RecordingTrace, kinds: dict[str, str], t0: float) -> list[Span]:
    """The trace's spans of the kinds in `kinds` (renamed to its values), as Spans from t0, in start order."""
    return [Span(kinds[s.kind], s.start_ms - t0, s.ms) for s in trace.spans if s.kind in kinds]


def record_plain(target: Transformer, prompt_ids: Sequence[int], max_new_tokens: int) -> Timeline:
    """Greedy `generate` with every target forward timed through forward hooks (the first is the prefill; each
    later one commits 1 token)."""
    trace = RecordingTrace(target.device)
    with one_thread(), forward_spans(target, trace):
        t0 = trace.now_ms()
        tokens = generate(target, torch.tensor([list(prompt_ids)], device=target.device), max_new_tokens)[0].tolist()
    spans = _spans(trace, {"forward": "decode"}, t0)
    if spans:
        spans[0].kind = "prefill"
    for span in spans[1:]:
        span.tokens = 1
    return Timeline("plain decoding", spans, tokens)


def record_speculative(
    target: Transformer, drafter: Drafter | Transformer, prompt_ids: Sequence[int], max_new_tokens: int, k: int,
    min_path_prob: float = 0.0,
) -> Timeline:
    """Greedy `speculative_generate` (chains of k, or stopped early by `min_path_prob`) with its trace recorded: the
    prefill, every drafter call ("draft_call" spans) and every verify forward. Each verify span carries the tokens
    that pass committed (accepted drafts + the target's token)."""
    trace = RecordingTrace(target.device)
    with one_thread():
        t0 = trace.now_ms()
        out = speculative_generate(target, as_drafter(drafter), list(prompt_ids), max_new_tokens, k=k,
                                   min_path_prob=min_path_prob, trace=trace)
    spans = _spans(trace, {"prefill": "prefill", "draft_call": "draft", "verify": "verify"}, t0)
    verifies = [s for s in spans if s.kind == "verify"]
    if len(verifies) != len(out.accepted_per_call):
        raise RuntimeError(f"{len(verifies)} verify forwards timed, {len(out.accepted_per_call)} recorded")
    for span, accepted in zip(verifies, out.accepted_per_call):
        span.tokens = accepted + 1
    stop = f", stop below {min_path_prob}" if min_path_prob else ""
    return Timeline(f"speculative, k = {k}{stop}", spans, out.tokens, out)
