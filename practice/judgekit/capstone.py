"""`python practice/judge.py capstone`: the learner's pieces assembled into a tree speculative decoder, run on
the embedded model over held-out prompts. The decoder is the package's loop (`speculate`) with the pieces as its
verify rules and proposers (`capstone_loop`, `capstone_drafters`).

- greedy rows, one per drafting piece (prompt lookup 12, draft tree 11, EAGLE-2 13, confident chain 15), each
  checked token for token against plain decoding per prompt, with τ and the speedup over plain decoding, and
  the package's own loop (`speculate`) with the same drafter beside it, interleaved per prompt in the same run
  (thread CPU time, one torch thread);
- the tree-forward check: greedy decoding verified by piece 10 (no KV cache);
- rules on constructed inputs (`capstone_rules`): each learner's piece against its exercise's solution on
  inputs its rows seldom meet (deep trees and paths, several frontier nodes, far matches, q == theta);
- the sampled check: piece 07 inside the loop, with a draft far from the target (`ReversedDraft`), Pearson
  chi-square of short continuations against the exact law of plain sampling (fixed seeds);
- a summary and a timeline figure in the workspace.
A divergence is traced to one piece by running the prompt again with only that piece from the learner. Every
piece call runs under a time limit (`capstone_pieces.time_limit`), so a piece that never returns is named too.
"""
from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path

import torch

from mini_llm import generate
from tree_spec.analysis.clocks import one_thread
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.core.accept import accept_greedy
from tree_spec.core.contracts import Branching
from tree_spec.decoding.loop import speculate

from .capstone_loop import Pieces, Shadow, speculate_with
from .capstone_models import Models, Plan, RowSpec, row_specs
from .capstone_pieces import BY_KEY, DRAFT_KEYS, PIECES, VERIFY_KEYS, PieceError, Source, choose, reference
from .capstone_rules import snapshots, unchanged, walks
from .capstone_report import Failure, Result, RowResult, divergence, draw_timeline, rows_table, sources_table, summary
from .capstone_sampled import sampled_check
from .settings import Settings
from .values import law_holds


def mine(sources: dict[str, Source], keys: tuple[str, ...] | list[str]) -> list[str]:
    """The keys whose function is not the reference (the learner's, or a --piece file)."""
    return [k for k in keys if sources[k].kind in ("yours", "file")]


def isolate(run: Callable[[Pieces], list[int]], want: list[int], suspects: list[str], refs: dict[str, Source],
            sources: dict[str, Source], prompt: str) -> list[str]:
    """The suspects that still diverge when they are the only non-reference piece (all of them if none does)."""
    blamed = []
    for key in suspects:
        pieces = Pieces({**refs, key: sources[key]}, prompt)
        try:
            if run(pieces) != want:
                blamed.append(key)
        except PieceError:
            blamed.append(key)
    return blamed or suspects


class Capstone:
    """One capstone run: models, prompts, plain decoding, then the rows and checks, in order."""

    def __init__(self, settings: Settings, sources: dict[str, Source], plan: Plan, say: Callable[[str], None],
                 models: Models | None = None) -> None:
        self.settings, self.plan, self.say = settings, plan, say
        self.refs = {p.key: Source("solution", settings.exercises / p.exercise / "solution.py", reference(settings, p))
                     for p in PIECES}
        self.result = Result(sources)
        self.m = models or Models.load(settings)
        self.prompts = held_out_prompts(self.m.tokenizer, max(plan.prompts, 2))[:plan.prompts]

    def log(self, text: str) -> None:
        self.result.lines.append(text)
        self.say(text)

    def fail(self, check: str, keys: list[str], message: str) -> None:
        failure = Failure(check, keys, message)
        self.result.failures.append(failure)
        self.log(failure.text())

    def greedy_rows(self) -> None:
        sources, plan, target = self.result.sources, self.plan, self.m.target
        specs = row_specs(self.m)
        results = [RowResult(s) for s in specs]
        plain_ms, plain, shadows = 0.0, [], {s.key: Shadow(BY_KEY[s.key], self.refs[s.key].fn
                                                            if s.key in mine(sources, DRAFT_KEYS) else None)
                                             for s in specs}
        accepts = {s.key: Shadow(BY_KEY["03"], accept_greedy if mine(sources, ("03",)) else None) for s in specs}
        for i, prompt in enumerate(self.prompts):
            start = time.thread_time()
            want = generate(target, prompt, plan.new_tokens)[0].tolist()
            plain_ms += 1000 * (time.thread_time() - start)
            plain.append(want)
            for spec, row in zip(specs, results):
                if row.failed:
                    continue
                pieces, shadow = Pieces(sources, f"prompt {i}", accept_shadow=accepts[spec.key]), shadows[spec.key]
                before = shadow.seconds + accepts[spec.key].seconds
                start = time.thread_time()
                try:
                    out = speculate_with(target, spec.learner(pieces, shadow), prompt, plan.new_tokens, pieces, spec.shape)
                except PieceError as e:
                    row.failed = True
                    self.fail(f"{spec.name} row", [e.piece.key], f"{e.where}: {e.message}")
                    continue
                row.ms += 1000 * (time.thread_time() - start - (shadow.seconds + accepts[spec.key].seconds - before))
                row.tokens += len(out.tokens)
                row.target_calls += out.target_calls
                start = time.thread_time()
                with torch.inference_mode():  # as `speculate_with` and `generate` run
                    pkg = speculate(target, spec.package, prompt, plan.new_tokens, spec.shape)
                row.pkg_ms += 1000 * (time.thread_time() - start)
                row.pkg_tokens, row.pkg_calls = row.pkg_tokens + len(pkg.tokens), row.pkg_calls + pkg.target_calls
                row.pkg_identical += pkg.tokens == want
                if out.tokens == want:
                    row.identical += 1
                    continue
                row.failed = True
                suspects = mine(sources, VERIFY_KEYS) or list(VERIFY_KEYS)
                run = lambda p, spec=spec, prompt=prompt: speculate_with(
                    target, spec.learner(p, Shadow(BY_KEY[spec.key], None)), prompt, plan.new_tokens, p, spec.shape
                ).tokens
                blamed = isolate(run, want, suspects, self.refs, sources, f"prompt {i}")
                self.fail(f"{spec.name} row", blamed, f"prompt {i}, {divergence(want, out.tokens, self.m.tokenizer)} "
                                                      f"(greedy output must equal plain decoding token for token)")
        for spec, row in zip(specs, results):
            if accepts[spec.key].mismatch and not row.failed:
                row.failed, self.result.rules_followed = True, False
                self.fail(f"{spec.name} row", ["03"], f"accepted a different path than the rule at "
                                                      f"{accepts[spec.key].mismatch} (the output stays identical, "
                                                      f"the speedup does not)")
            shadow = shadows[spec.key]
            if shadow.mismatch and not row.failed:
                row.failed, self.result.rules_followed = True, False
                self.fail(f"{spec.name} row", [spec.key], f"drafted a different tree than the exercise's rule at "
                                                          f"{shadow.mismatch} (the output stays identical, the drafts do not)")
        self.plain = plain
        self.result.plain_ms_per_token = plain_ms / sum(len(t) for t in plain)
        self.result.rows = results

    def tree_forward(self) -> int:
        """Greedy decoding verified by piece 10 (a fresh prefill per pass): prompts identical to plain decoding."""
        sources, plan, target = self.result.sources, self.plan, self.m.target
        shape, identical = Branching((2, 2, 1, 1)), 0
        for i, prompt in enumerate(self.prompts[:plan.tree_forward_prompts]):
            run = lambda p, prompt=prompt: speculate_with(target, self.m.small, prompt, plan.new_tokens, p, shape,
                                                          cached=False).tokens
            try:
                got = run(Pieces(sources, f"prompt {i}"))
            except PieceError as e:
                self.fail("tree forward", [e.piece.key], f"{e.where}: {e.message}")
                return identical
            if got != self.plain[i]:
                blamed = isolate(run, self.plain[i], mine(sources, ("10", "03")) or ["10"], self.refs, sources,
                                 f"prompt {i}")
                self.fail("tree forward", blamed, f"prompt {i}, {divergence(self.plain[i], got, self.m.tokenizer)}")
                return identical
            identical += 1
        return identical

    def rule_walks(self) -> None:
        """Each of the learner's pieces on the constructed inputs of `capstone_rules` against its exercise's solution,
        its arguments checked unchanged after the call (the acceptance walk's target_logits is read after it)."""
        sources, mine_keys = self.result.sources, mine(self.result.sources, [p.key for p in PIECES])
        todo = [w for w in walks(self.m.small, self.prompts[0]) if w.key in mine_keys]
        failed: set[str] = set()
        for walk in todo:
            if walk.key in failed:
                continue
            args = walk.args()
            before = snapshots(args)
            try:
                got = Pieces(sources, walk.name).call(walk.key, *args)
            except PieceError as e:
                problem = e.message
            else:
                moved, want = unchanged(before, args), walk.what(self.refs[walk.key].fn(*walk.args()))
                names = list(inspect.signature(self.refs[walk.key].fn).parameters)
                problem = (f"returned {walk.what(got)!r:.300}; the rule gives {want!r:.300}" if walk.what(got) != want
                           else None if moved is None else
                           f"changed {names[moved] if moved < len(names) else 'an argument'} in place (the loop "
                           f"reads its arguments after the call; the exercise grades them unchanged)")
                if walk.key == "03" and problem and problem.startswith("returned"):
                    problem = f"returned the path {walk.what(got)}; the rule accepts {want}"
            if problem:
                failed.add(walk.key)
                self.result.rules_followed = False
                self.fail("rules on constructed inputs", [walk.key], f"on {walk.name}: {problem}")
        if todo:
            keys = sorted({w.key for w in todo} - failed)
            self.log(f"rules on constructed inputs: {', '.join(keys) or 'none'} of your pieces "
                     f"{', '.join(sorted({w.key for w in todo}))} follow the exercises' rules on {len(todo)} inputs "
                     f"their rows seldom meet (capstone_rules)")

    def sampled(self, seed: int = 0) -> None:
        """Piece 07 in the loop against plain sampling's exact law (`capstone_sampled`): logs the verdict, sets
        `result.sampling_p` and fails when the law does not hold or a piece fails."""
        pieces = Pieces(self.result.sources, "sampled check")
        try:
            check = sampled_check(self.m.target, self.m.small, self.prompts[0][:16], self.plan.samples,
                                  self.plan.sample_tokens, pieces, seed)
        except PieceError as e:
            self.fail("sampled check", [e.piece.key], f"{e.where}: {e.message}")
            return
        self.result.sampling_p = check.p
        self.log(check.line())
        if not check.passed:
            broken = sorted({k for f in self.result.failures for k in f.keys} & {"01", "02", "09"})
            self.fail("sampled check", mine(self.result.sources, ("07",)) or ["07"], check.problem(broken))


def run(settings: Settings, sources: dict[str, Source], plan: Plan = Plan(),
        say: Callable[[str], None] = print, models: Models | None = None) -> Result:
    """The whole capstone (one torch thread); prints as it goes and returns what it found. models: loaded once by
    the caller (tests), else loaded here."""
    started = time.perf_counter()
    with one_thread():
        cap = Capstone(settings, sources, plan, say, models)
        log = cap.log
        n = plan.prompts
        log(f"Capstone: a tree speculative decoder assembled from your pieces, on {settings.model} "
            f"({n} held-out prompts x {plan.new_tokens} new tokens, cpu, 1 torch thread, thread CPU time)")
        log("pieces:")
        for line in sources_table(sources):
            log(line)
        warm = Plan(prompts=1, new_tokens=8)
        Capstone.greedy_rows(_warm(cap, warm))
        cap.greedy_rows()
        r = cap.result
        for line in rows_table(r.rows, r.plain_ms_per_token, n):
            log(line)
        log("")
        cap.rule_walks()
        same = cap.tree_forward()
        log(f"tree forward (10): {same}/{plan.tree_forward_prompts} prompts identical to plain decoding, each pass "
            f"verified by tree_logits without a KV cache (small-model tree [2, 2, 1, 1])")
        cap.sampled()
        best = r.best()
        if best is not None:
            r.figure = settings.workspace / "capstone-timeline.png"
            _timeline(cap, best.spec, r.figure)
    identical = all(row.identical == n for row in r.rows) and same == plan.tree_forward_prompts
    sampled_ok = r.sampling_p is not None and law_holds(r.sampling_p)
    r.passed = r.ok and identical and r.rules_followed and sampled_ok  # from the counts too, not only the failure list
    for line in summary(r, identical, sampled_ok, time.perf_counter() - started):
        log(line)
    return r


def _timeline(cap: Capstone, spec: RowSpec, path: Path) -> None:
    """The learner's `spec` row beside plain decoding on the first prompt, drawn at `path`."""
    pieces = Pieces(cap.result.sources, "prompt 0")
    proposer = spec.learner(pieces, Shadow(BY_KEY[spec.key], None))
    with torch.inference_mode():
        draw_timeline(cap.m.target, proposer, cap.prompts[0], cap.plan.new_tokens, pieces, spec, path)


def _warm(cap: Capstone, plan: Plan) -> Capstone:
    """A throw-away copy of `cap` on a short plan: running it first warms every code path the timed rows use."""
    warm = object.__new__(Capstone)
    warm.__dict__.update(cap.__dict__, plan=plan, prompts=cap.prompts[:1], result=Result(cap.result.sources),
                         say=lambda _: None)
    return warm


def command(settings: Settings, solutions: bool, fast: bool, piece_files: list[str]) -> int:
    """`judge.py capstone [--solutions] [--fast] [--piece NN=file ...]` -> exit code (0: every check passed)."""
    from .capstone_pieces import piece_key
    from .capstone_status import PASSED, missing
    from .progress import Progress

    try:
        overrides = {piece_key(k): Path(v) for k, v in (item.split("=", 1) for item in piece_files)}
    except (ValueError, LookupError) as e:
        print(f"--piece takes NN=path (e.g. --piece 03=my_accept.py): {e}")
        return 2
    todo = [] if solutions else missing(settings)
    if todo:
        print(f"The capstone is locked: pass {', '.join(todo)} first (python practice/judge.py test N); "
              f"the other pieces fall back to the package until you pass them.")
        return 1
    try:
        sources = choose(settings, solutions, overrides)
    except PieceError as e:
        print(f"FAIL loading your {e.piece.label}: {e.message}")
        return 1
    result = run(settings, sources, Plan.fast() if fast else Plan())
    if result.passed and not (solutions or overrides or fast):  # only the full run with your own pieces counts
        progress = Progress.load(settings.workspace)
        progress.passed.add(PASSED)
        progress.save(settings.workspace)
    return 0 if result.passed else 1

