"""A `Trace` (core.contracts) that records the decoding loops' phases, and forward hooks for loops without one.

The loops open `trace.span(kind, **info)` around "prefill" (tokens=n), "draft" (one proposer call), "draft_call"
(one level-wise `next_logits` call inside it, width=frontier size), "verify" (tokens=n) and "observe".
`RecordingTrace` keeps every span with its start and end on `device_clock`. Plain decoding (`mini_llm.generate`)
has no trace: `forward_spans` records each forward of a module as a "forward" span (tokens = new tokens per row)
through torch's forward hooks, removed on exit.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

import torch

from .clocks import device_clock

FORWARD_KINDS = ("prefill", "verify", "forward")  # spans that are one target forward


@dataclass
class SpanRecord:
    """One span: kind, its info (tokens=, width=), start and end in ms since the trace began, and the index of
    the span it ran inside (None at the top level)."""

    kind: str
    info: dict[str, int]
    start_ms: float
    end_ms: float = float("nan")
    parent: int | None = None

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass
class RecordingTrace:
    """Records every span, in the order they start, timed on `device_clock(device)`."""

    device: torch.device | str | None = None
    spans: list[SpanRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._clock = device_clock(self.device)
        self._t0 = self._clock()
        self._open: list[int] = []
        self._children: dict[int, list[int]] = {}

    def now_ms(self) -> float:
        """ms of the device clock since the trace was made."""
        return 1000 * (self._clock() - self._t0)

    def span(self, kind: str, **info: int) -> AbstractContextManager[None]:
        return _Span(self, kind, info)

    def _enter(self, kind: str, info: dict[str, int]) -> SpanRecord:
        record = SpanRecord(kind, info, self.now_ms(), parent=self._open[-1] if self._open else None)
        if record.parent is not None:
            self._children.setdefault(record.parent, []).append(len(self.spans))
        self.spans.append(record)
        self._open.append(len(self.spans) - 1)
        return record

    def _exit(self, record: SpanRecord) -> None:
        self._open.pop()
        record.end_ms = self.now_ms()

    def top(self, *kinds: str) -> list[SpanRecord]:
        """The top-level spans of these kinds, in order."""
        return [s for s in self.spans if s.parent is None and s.kind in kinds]

    def children(self, index: int) -> list[SpanRecord]:
        """The spans opened directly inside span `index`."""
        return [self.spans[i] for i in self._children.get(index, [])]


class _Span:
    """One `RecordingTrace.span`: a plain context manager (cheaper than a generator one: its cost is inside the
    loop overhead it measures)."""

    __slots__ = ("trace", "kind", "info", "record")

    def __init__(self, trace: RecordingTrace, kind: str, info: dict[str, int]) -> None:
        self.trace, self.kind, self.info = trace, kind, info

    def __enter__(self) -> None:
        self.record = self.trace._enter(self.kind, self.info)

    def __exit__(self, *exc: object) -> None:
        self.trace._exit(self.record)


@contextmanager
def forward_spans(module: torch.nn.Module, trace: RecordingTrace) -> Iterator[None]:
    """Inside the block, every forward of `module` is a "forward" span of `trace` (tokens = new tokens per row:
    the last dimension of the ids [B, T] it is called with), recorded with `register_forward_pre_hook` /
    `register_forward_hook`."""
    open_spans: list[AbstractContextManager[None]] = []

    def pre(mod: torch.nn.Module, args: tuple) -> None:
        span = trace.span("forward", tokens=int(args[0].shape[-1]))
        span.__enter__()
        open_spans.append(span)

    def post(mod: torch.nn.Module, args: tuple, out: object) -> None:
        open_spans.pop().__exit__(None, None, None)

    hooks = [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        while open_spans:  # a forward that raised never reached its post hook
            open_spans.pop().__exit__(None, None, None)
