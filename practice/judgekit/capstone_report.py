"""What a capstone run found and how it reads: failures, per-row counts, the result, its table and summary lines,
and the timeline figure of the learner's fastest row."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mini_llm import Transformer
from tree_spec.core.contracts import Proposer

from .capstone_loop import Pieces, speculate_with
from .capstone_models import RowSpec
from .capstone_pieces import BY_KEY, PIECES, Source


@dataclass
class Failure:
    """A failed check: the pieces it names, what and where, and which exercises to revisit."""

    check: str
    keys: list[str]
    message: str

    def text(self) -> str:
        names = ", ".join(BY_KEY[k].label for k in self.keys)
        revisit = ", ".join(f"python practice/judge.py test {k}" for k in self.keys)
        return f"FAIL {self.check}: your {names}\n  {self.message}\n  Revisit: {revisit}"


@dataclass
class RowResult:
    """A greedy row's counts over the prompts: the learner's decoder, then the package's loop beside it."""

    spec: RowSpec
    identical: int = 0
    tokens: int = 0
    target_calls: int = 0
    ms: float = 0.0
    pkg_identical: int = 0
    pkg_tokens: int = 0
    pkg_calls: int = 0
    pkg_ms: float = 0.0
    failed: bool = False


@dataclass
class Result:
    """What the capstone found; `lines` is what it printed."""

    sources: dict[str, Source]
    rows: list[RowResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    plain_ms_per_token: float = 0.0
    sampling_p: float | None = None
    figure: Path | None = None
    lines: list[str] = field(default_factory=list)
    rules_followed: bool = True  # the rows' drafts and accepted paths and the acceptance walk, as the rules make them
    passed: bool = False  # the verdict: no failure, every output identical, every rule followed, the law held

    @property
    def ok(self) -> bool:
        return not self.failures

    def best(self) -> RowResult | None:
        good = [r for r in self.rows if not r.failed and r.ms > 0]
        return max(good, key=lambda r: self.plain_ms_per_token / (r.ms / r.tokens), default=None)


def divergence(want: list[int], got: list[int], tokenizer: Any) -> str:
    """'new token j: expected 'x' (id a), got 'y' (id b)' for the first differing token."""
    j = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    show = lambda ids: f"{tokenizer.decode(ids[j:j + 1])!r} (id {ids[j]})" if j < len(ids) else "nothing"
    return f"new token {j}: expected {show(want)}, got {show(got)}"


def sources_table(sources: dict[str, Source]) -> list[str]:
    """One line per piece: its function, whose code runs it, its part in the decoder."""
    who = {"yours": "yours", "file": "file", "solution": "solution", "package": "package (not solved yet)"}
    return [f"  {p.key}  {p.function:<21} {who[sources[p.key].kind]:<25} {p.role}" for p in PIECES]


def rows_table(rows: list[RowResult], plain_ms_per_token: float, n: int) -> list[str]:
    """The greedy rows' table: its legend, header, plain decoding's line and one line per row."""
    def part(identical: int, tokens: int, calls: int, ms: float) -> str:
        if not tokens:
            return f"{identical}/{n} {'—':>5} {'—':>6} {'—':>6}"
        return f"{identical}/{n} {tokens / calls:5.2f} {ms / tokens:6.2f} {plain_ms_per_token / (ms / tokens):5.2f}x"

    lines = ["\ngreedy rows: identical = prompts equal to plain decoding token for token; τ = tokens per target call;"
             "\nms/tok = thread CPU ms per token; speedup = plain ms/token / row ms/token (same run, interleaved)",
             f"  {'':2} {'drafter':<27} {'form':<36} {'yours: same  τ':<14} {'ms/tok':>6} {'speedup':>6}"
             f"   {'package loop: same τ':<20} {'ms/tok':>5} {'speedup':>6}",
             f"  {'':2} {'plain decoding (mini_llm)':<27} {'1 token / call':<36} {n}/{n}  1.00 "
             f"{plain_ms_per_token:6.2f}  1.00x"]
    for r in rows:
        mark = "   FAILED (the row and its package loop stop at its first failure)" if r.failed else ""
        lines.append(f"  {r.spec.key} {r.spec.name:<27} {r.spec.form:<36} "
                     f"{part(r.identical, r.tokens, r.target_calls, r.ms)}   "
                     f"{part(r.pkg_identical, r.pkg_tokens, r.pkg_calls, r.pkg_ms)}{mark}")
    return lines


def summary(r: Result, identical: bool, sampled_ok: bool, seconds: float) -> list[str]:
    """The closing lines: whose pieces ran, the three verdicts, the best row, PASS or FAIL (from `r.passed`)."""
    sources = r.sources
    theirs = [p.key for p in PIECES if sources[p.key].kind in ("yours", "file", "solution")]
    whose = "the solutions" if any(s.kind == "solution" for s in sources.values()) else "you"
    lines = [f"\nsummary: pieces from {whose}: {' '.join(theirs) or 'none'}; "
             f"package: {' '.join(k for k in BY_KEY if k not in theirs) or 'none'}",
             f"  greedy outputs identical to plain decoding: {'yes' if identical else 'no'}; drafts and accepted "
             f"paths follow the exercises' rules: {'yes' if r.rules_followed else 'no'}; sampled check: "
             f"{'pass' if sampled_ok else 'FAIL'}"]
    best = r.best()
    if best is not None:
        lines.append(f"  best speedup: {r.plain_ms_per_token / (best.ms / best.tokens):.2f}x ({best.spec.name}, "
                     f"τ {best.tokens / best.target_calls:.2f}); timeline: {_shown(r.figure)}")
    lines.append(f"  {'PASS' if r.passed else 'FAIL'} in {seconds:.0f} s")
    return lines


def draw_timeline(target: Transformer, proposer: Proposer, prompt: list[int], n: int, pieces: Pieces,
                  spec: RowSpec, path: Path) -> None:
    """Plain decoding and the learner's `spec` row (`proposer`) on `prompt`, as a Gantt chart at `path`: each
    verify span carries what its pass committed (accepted drafts + the target's token, `accepted_per_call`)."""
    import matplotlib

    matplotlib.use("Agg")
    from tree_spec.analysis.timeline import Span, Timeline, record_plain
    from tree_spec.analysis.trace import RecordingTrace
    from tree_spec.ui.plots import draw_timeline as draw

    plain = record_plain(target, prompt, n)
    trace = RecordingTrace()
    out = speculate_with(target, proposer, prompt, n, pieces, spec.shape, trace=trace)
    t0 = trace.spans[0].start_ms
    spans = [Span(s.kind, s.start_ms - t0, s.ms) for s in trace.spans if s.kind in ("prefill", "draft", "verify")]
    for span, accepted in zip([s for s in spans if s.kind == "verify"], out.accepted_per_call):
        span.tokens = accepted + 1
    fig = draw(plain, Timeline(f"your {spec.name}", spans, out.tokens), n_tokens=min(24, n - 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _shown(path: Path | None) -> str:
    """A path relative to the repository when it is inside it."""
    from .settings import REPO

    try:
        return str(path.resolve().relative_to(REPO)) if path is not None else ""
    except ValueError:
        return str(path)
