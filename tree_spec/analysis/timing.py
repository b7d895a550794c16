"""Where a generation's time goes: prefill, the later target forwards, the drafter's calls and the rest.

The decoding loops report their phases to a `RecordingTrace` (passed as `trace=`); plain decoding, which has no
trace, is timed through forward hooks on the target (`forward_spans`). One clock: `device_clock(target.device)`.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from mini_llm import Transformer

from ..core.contracts import Trace
from ..decoding.tree import tree_speculative_generate
from ..drafters.base import Drafter
from ..drafters.model import as_drafter
from .clocks import one_thread
from .curve import random_ids
from .trace import FORWARD_KINDS, RecordingTrace, forward_spans

T = TypeVar("T")


@dataclass
class TimeSplit:
    """Where the time of one or more generations went, in ms of `device_clock`; `a + b` pools two.

    A generation's first target forward is its prefill; the later ones are its decode steps (plain) or verify
    passes (speculative). Sizes are new tokens per row. draft_calls: one
    (method, frontier width or 0, ms) per drafter call: "next_logits" for each level a level-wise drafter drafts,
    "propose" for a proposer that drafts a whole tree at once, "observe" for taking the target's features.
    `rest_ms` is everything else the loop did: tree building, sampling, acceptance, cache moves, Python;
    pass_overhead_ms: that rest per verify pass (per decode step for plain decoding), one entry each.
    """

    total_ms: float = 0.0
    prefill_ms: float = 0.0
    forward_ms: float = 0.0       # the target forwards after the prefill
    prefill_sizes: Counter = field(default_factory=Counter)   # new tokens per row of a prefill -> prefills
    forward_sizes: Counter = field(default_factory=Counter)   # new tokens per row of a later forward -> forwards
    draft_calls: list = field(default_factory=list)
    pass_overhead_ms: list = field(default_factory=list)

    @property
    def forwards(self) -> int:
        """Target forwards after the prefill."""
        return sum(self.forward_sizes.values())

    @property
    def draft_ms(self) -> float:
        """The drafter's calls, summed."""
        return sum(ms for *_, ms in self.draft_calls)

    @property
    def rest_ms(self) -> float:
        return self.total_ms - self.prefill_ms - self.forward_ms - self.draft_ms

    def to_dict(self) -> dict:
        """JSON-ready: the fields (counters as {size: count}), and rest_ms."""
        return dict(total_ms=self.total_ms, prefill_ms=self.prefill_ms, forward_ms=self.forward_ms,
                    draft_ms=self.draft_ms, rest_ms=self.rest_ms, prefill_sizes=dict(self.prefill_sizes),
                    forward_sizes=dict(self.forward_sizes), draft_calls=[list(c) for c in self.draft_calls],
                    pass_overhead_ms=list(self.pass_overhead_ms))

    def __add__(self, other: TimeSplit) -> TimeSplit:
        return TimeSplit(self.total_ms + other.total_ms, self.prefill_ms + other.prefill_ms,
                         self.forward_ms + other.forward_ms, self.prefill_sizes + other.prefill_sizes,
                         self.forward_sizes + other.forward_sizes, self.draft_calls + other.draft_calls,
                         self.pass_overhead_ms + other.pass_overhead_ms)


def _drafter_span(trace: RecordingTrace, index: int) -> bool:
    """Whether span `index` is drafter work: a "draft_call", an "observe", or a "draft" with no call inside."""
    s = trace.spans[index]
    return s.kind in ("draft_call", "observe") or (s.kind == "draft" and not trace.children(index))


def drafter_calls(trace: RecordingTrace) -> list[tuple[str, int, float]]:
    """(method, width, ms) of every drafter call in `trace`: each "draft_call" span as ("next_logits", width), a
    "draft" span without one inside as ("propose", 0), an "observe" span as ("observe", 0)."""
    calls = []
    for i, s in enumerate(trace.spans):
        if _drafter_span(trace, i):
            method = {"draft_call": "next_logits", "observe": "observe"}.get(s.kind, "propose")
            calls.append((method, s.info.get("width", 0), s.ms))
    return calls


def pass_overheads(trace: RecordingTrace) -> list[float]:
    """ms of loop work outside the model and the drafter in each verify pass (each decode step of plain decoding):
    from the end of the previous top-level target forward (the prefill for the first pass) to the end of this
    one, less this forward and the drafter's spans in between."""
    overheads, mark, drafter_ms = [], None, 0.0
    for i, s in enumerate(trace.spans):
        if s.parent is None and s.kind in FORWARD_KINDS:
            if mark is not None:
                overheads.append(s.end_ms - mark - s.ms - drafter_ms)
            mark, drafter_ms = s.end_ms, 0.0
        elif _drafter_span(trace, i):
            drafter_ms += s.ms
    return overheads


def split_of(trace: RecordingTrace, total_ms: float) -> TimeSplit:
    """The TimeSplit of one generation recorded in `trace` that took `total_ms`: its top-level forwards (the
    first is the prefill) and its drafter calls. A forward's size: its hooked "forward" child's tokens (per row)
    when `forward_spans` watched the target, else the span's own tokens."""
    forwards = []
    for i, s in enumerate(trace.spans):
        if s.parent is None and s.kind in FORWARD_KINDS:
            hooked = [c for c in trace.children(i) if c.kind == "forward"]
            forwards.append(((hooked[0] if hooked else s).info.get("tokens", 0), s.ms))
    split = TimeSplit(total_ms, draft_calls=drafter_calls(trace), pass_overhead_ms=pass_overheads(trace))
    if forwards:
        split.prefill_ms, split.prefill_sizes = forwards[0][1], Counter([forwards[0][0]])
        split.forward_ms, split.forward_sizes = sum(ms for _, ms in forwards[1:]), Counter(n for n, _ in forwards[1:])
    return split


def time_split(run: Callable[[Trace], T], target: Transformer) -> tuple[T, TimeSplit]:
    """`run(trace)` once (one generation), timed whole and by part -> (its result, the TimeSplit).

    A decoding loop reports to the trace `run` passes it; forwards of `target` outside any loop span (plain
    decoding) are recorded by forward hooks."""
    trace = RecordingTrace(target.device)
    with forward_spans(target, trace):
        start = trace.now_ms()
        result = run(trace)
        total_ms = trace.now_ms() - start
    return result, split_of(trace, total_ms)


@dataclass
class DrafterCost:
    """Measured drafter cost. ms_per_call: mean ms of one `next_logits` call (= one tree level, the whole
    frontier in one batch); by_width: mean ms per call keyed by the frontier size; calls: calls timed."""

    ms_per_call: float
    by_width: dict[int, float]
    calls: int

    def ms(self, width: int) -> float:
        """ms of one call with `width` frontier nodes (the nearest measured width; the mean if none)."""
        if not self.by_width:
            return self.ms_per_call
        nearest = min(self.by_width, key=lambda w: (abs(w - width), w))
        return self.by_width[nearest]


def measure_drafter_cost(
    drafter: Drafter | Transformer,
    target: Transformer,
    prompt_ids: Sequence[int] | None = None,
    new_tokens: int = 32,
    branching: Sequence[int] = (2, 2, 1, 1),
) -> DrafterCost:
    """ms per drafter call (one `next_logits` call = one tree level for the whole frontier), measured inside a short
    greedy tree generation with one torch thread (feature drafters get real target features): the trace's
    "draft_call" spans. Work done in `observe` (e.g. a head encoding the target's features) is not included."""
    drafter = as_drafter(drafter)
    prompt = list(prompt_ids) if prompt_ids is not None else random_ids(target, 64)[0].tolist()
    trace = RecordingTrace(drafter.device)
    with one_thread():
        tree_speculative_generate(target, drafter, prompt, new_tokens, branching=branching, trace=trace)
    record = [(s.info["width"], s.ms) for s in trace.spans if s.kind == "draft_call"]
    if not record:
        raise ValueError("the drafter was never called")
    by_width: dict[int, list[float]] = {}
    for width, ms in record:
        by_width.setdefault(width, []).append(ms)
    return DrafterCost(
        ms_per_call=sum(ms for _, ms in record) / len(record),
        by_width={w: sum(v) / len(v) for w, v in sorted(by_width.items())},
        calls=len(record),
    )
