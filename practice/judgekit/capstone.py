"""`python practice/judge.py capstone`: the learner's pieces assembled into a tree speculative decoder, run on
the embedded model over held-out prompts.

- greedy rows, one per drafting piece (prompt lookup 12, draft tree 11, EAGLE-2 13, confident chain 15), each
  checked token for token against plain decoding per prompt, with τ and the speedup over plain decoding, and
  the package's own loop (`speculate`) with the same drafter beside it, interleaved per prompt in the same run
  (thread CPU time, one torch thread);
- the tree-forward check: greedy decoding verified by piece 10 (no KV cache);
- the acceptance walk: piece 03 against the exercise's rule on constructed trees with deep agreeing paths;
- the sampled check: piece 07 inside the loop, with a draft far from the target (`ReversedDraft`), Pearson
  chi-square of short continuations against the exact law of plain sampling (fixed seeds);
- a summary and a timeline figure in the workspace.
A divergence is traced to one piece by running the prompt again with only that piece from the learner. Every
piece call runs under a time limit (`capstone_pieces.time_limit`), so a piece that never returns is named too.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer, logits_to_probs
from tree_spec import ModelDrafter, NGramDrafter, SamplingParams, load_head
from tree_spec.analysis.clocks import one_thread
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.analysis.stats import chi_square
from tree_spec.core.contracts import Branching, DynamicShape
from tree_spec.decoding.loop import speculate

from .capstone_drafters import ConfidentProposer, Eagle2Proposer, NGramProposer, ReversedDraft, TreeProposer
from .capstone_loop import Pieces, Shadow, decode
from .capstone_pieces import BY_KEY, DRAFT_KEYS, PIECES, VERIFY_KEYS, PieceError, Source, choose, reference
from .settings import REPO, Settings

P_MIN = 0.001  # the sampled check passes when p > P_MIN


@dataclass(frozen=True)
class Plan:
    """How much the capstone runs: the full run (the learner's) or the suite's fast mode."""

    prompts: int = 8
    new_tokens: int = 64
    tree_forward_prompts: int = 4
    samples: int = 600
    sample_tokens: int = 3

    @classmethod
    def fast(cls) -> Plan:
        return cls(prompts=2, new_tokens=16, tree_forward_prompts=1, samples=100)


@dataclass
class Models:
    """The target, its tokenizer, the small draft model and the shipped MTP and EAGLE heads."""

    target: Transformer
    tokenizer: Any
    small: ModelDrafter
    mtp: Any
    eagle: Any

    @classmethod
    def load(cls, settings: Settings) -> Models:
        target = load_model(settings.model_path())
        heads = REPO / "models" / "heads"
        return cls(target, load_tokenizer(settings.model_path()), ModelDrafter(load_model(REPO / "models" / "tiny-qwen3-draft")),
                   load_head(heads / "mtp", target), load_head(heads / "eagle", target))


@dataclass
class RowSpec:
    """A greedy row: the drafting piece, its form, the shape, the learner's proposer and the package's drafter."""

    key: str
    name: str
    form: str
    shape: Branching | DynamicShape
    learner: Callable[[Pieces, Shadow], Any]
    package: Any


def row_specs(m: Models) -> list[RowSpec]:
    vocab = m.target.cfg.vocab_size
    chain6 = Branching((1,) * 6, min_path_prob=0.3)
    return [
        RowSpec("12", "prompt lookup", "chain k=5, n = 4..1", Branching((1,) * 5),
                lambda p, s: NGramProposer(p, s, vocab, 5), NGramDrafter(vocab)),
        RowSpec("11", "draft tree · MTP head", "tree [2, 1, 1, 1]", Branching((2, 1, 1, 1)),
                lambda p, s: TreeProposer(p, s, m.mtp, [2, 1, 1, 1]), m.mtp),
        RowSpec("13", "EAGLE-2 · EAGLE head", "dynamic depth 5, top_k 4, 16 tokens", DynamicShape(5, 4, 16),
                lambda p, s: Eagle2Proposer(p, s, m.eagle, 5, 4, 16), m.eagle),
        RowSpec("15", "confident chain · MTP head", "chain k<=6, theta 0.3", chain6,
                lambda p, s: ConfidentProposer(p, s, m.mtp, 6, 0.3), m.mtp),
    ]


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
    passed: bool = False  # the verdict: no failure, every output identical, every rule followed, the law held

    @property
    def ok(self) -> bool:
        return not self.failures

    def best(self) -> RowResult | None:
        good = [r for r in self.rows if not r.failed and r.ms > 0]
        return max(good, key=lambda r: self.plain_ms_per_token / (r.ms / r.tokens), default=None)


def mine(sources: dict[str, Source], keys: tuple[str, ...] | list[str]) -> list[str]:
    """The keys whose function is not the reference (the learner's, or a --piece file)."""
    return [k for k in keys if sources[k].kind in ("yours", "file")]


def divergence(want: list[int], got: list[int], tokenizer: Any) -> str:
    """'position j: expected 'x' (id a), got 'y' (id b)' for the first differing token."""
    j = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
    show = lambda ids: f"{tokenizer.decode(ids[j:j + 1])!r} (id {ids[j]})" if j < len(ids) else "nothing"
    return f"new token {j}: expected {show(want)}, got {show(got)}"


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
        accepts = {s.key: Shadow(BY_KEY["03"], self.refs["03"].fn if mine(sources, ("03",)) else None) for s in specs}
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
                    out = decode(target, spec.learner(pieces, shadow), prompt, plan.new_tokens, pieces, spec.shape).output
                except PieceError as e:
                    row.failed = True
                    self.fail(f"{spec.name} row", [e.piece.key], f"{e.where}: {e.message}")
                    continue
                row.ms += 1000 * (time.thread_time() - start - (shadow.seconds + accepts[spec.key].seconds - before))
                row.tokens += len(out.tokens)
                row.target_calls += out.target_calls
                start = time.thread_time()
                with torch.inference_mode():  # as `decode` and `generate` run
                    pkg = speculate(target, spec.package, prompt, plan.new_tokens, spec.shape)
                row.pkg_ms += 1000 * (time.thread_time() - start)
                row.pkg_tokens, row.pkg_calls = row.pkg_tokens + len(pkg.tokens), row.pkg_calls + pkg.target_calls
                row.pkg_identical += pkg.tokens == want
                if out.tokens == want:
                    row.identical += 1
                    continue
                row.failed = True
                suspects = mine(sources, VERIFY_KEYS) or list(VERIFY_KEYS)
                run = lambda p, spec=spec, prompt=prompt: decode(
                    target, spec.learner(p, Shadow(BY_KEY[spec.key], None)), prompt, plan.new_tokens, p, spec.shape
                ).output.tokens
                blamed = isolate(run, want, suspects, self.refs, sources, f"prompt {i}")
                self.fail(f"{spec.name} row", blamed, f"prompt {i}, {divergence(want, out.tokens, self.m.tokenizer)} "
                                                      f"(greedy output must equal plain decoding token for token)")
        for spec, row in zip(specs, results):
            if accepts[spec.key].mismatch and not row.failed:
                row.failed = True
                self.fail(f"{spec.name} row", ["03"], f"accepted a different path than the rule at "
                                                      f"{accepts[spec.key].mismatch} (the output stays identical, "
                                                      f"the speedup does not)")
            shadow = shadows[spec.key]
            if shadow.mismatch and not row.failed:
                row.failed = True
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
            run = lambda p, prompt=prompt: decode(target, self.m.small, prompt, plan.new_tokens, p, shape,
                                                  cached=False).output.tokens
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

    def accept_walks(self) -> None:
        """Piece 03 on `deep_trees` against the exercise's rule (the rows seldom accept more than 4 drafts), and
        that it leaves target_logits unchanged; only when piece 03 is not the reference."""
        if not mine(self.result.sources, ("03",)):
            return
        trees = deep_trees()
        for name, tokens, parents, logits in trees:
            want = self.refs["03"].fn(list(tokens), list(parents), logits.clone())
            before = logits.clone()
            try:
                got = Pieces(self.result.sources, name).accept(list(tokens), list(parents), logits)
            except PieceError as e:
                self.fail("acceptance walk", ["03"], f"on {name}: {e.message}")
                return
            if got != want or not torch.equal(logits, before):
                problem = f"returned the path {got}; the rule accepts {want}" if got != want else \
                    "changed target_logits in place (the loop reads it after the walk)"
                self.fail("acceptance walk", ["03"], f"on {name}: {problem}")
                return
        self.log(f"acceptance walk (03): your accept_greedy returns the rule's path on {len(trees)} constructed trees "
                 f"({'; '.join(name for name, *_ in trees)})")

    def sampled(self, seed: int = 0) -> None:
        """Piece 07 in the loop: `samples` continuations of `sample_tokens` tokens (temperature 1, top-k 3), each
        step drafting 2 children per root from the small model's top 3 reversed and sharpened (`ReversedDraft`:
        most tokens are then decided by rejections and residuals), against plain sampling's exact law (Pearson
        chi-square). Logs the verdict, sets `result.sampling_p` and fails when p <= P_MIN or a piece fails."""
        plan, target = self.plan, self.m.target
        prompt = self.prompts[0][:16]
        law = exact_law(target, prompt, plan.sample_tokens, temperature=1.0, top_k=3)
        sampling = SamplingParams(1.0, top_k=3, generator=torch.Generator().manual_seed(seed))
        pieces, draft = Pieces(self.result.sources, "sampled check"), ReversedDraft(self.m.small, 3)
        try:
            counts = Counter(tuple(decode(target, draft, prompt, plan.sample_tokens, pieces, Branching((2,)),
                                          sampling).output.tokens) for _ in range(plan.samples))
        except PieceError as e:
            self.fail("sampled check", [e.piece.key], f"{e.where}: {e.message}")
            return
        cells = list(law)
        observed = [counts.get(c, 0) for c in cells] + [plan.samples - sum(counts.get(c, 0) for c in cells)]
        stat, p = chi_square(observed, [law[c] for c in cells] + [0.0])
        self.result.sampling_p = p
        self.log(f"sampled (07): {plan.samples} runs of {plan.sample_tokens} tokens at temperature 1, top-k 3, "
                 f"2 children per root drawn from the small model's top 3 reversed and sharpened (a draft far from "
                 f"the target); chi-square against plain sampling's exact law over {len(cells)} continuations: "
                 f"statistic {stat:.1f}, p = {p:.3g} ({'pass' if p > P_MIN else 'FAIL'}: p > {P_MIN})")
        if p <= P_MIN:
            impossible = observed[-1]
            clue = (f"; {impossible} of {plan.samples} runs wrote a continuation plain sampling never draws (outside "
                    f"the top 3), as a sampler that keeps the draft's tokens does" if impossible else "")
            broken = sorted({k for f in self.result.failures for k in f.keys} & {"01", "02", "09"})
            context = (f"your {', '.join(broken)} already failed the greedy rows: fix {'it' if len(broken) == 1 else 'them'}"
                       f" first, since verify_tree ran on top of {'it' if len(broken) == 1 else 'them'}" if broken else
                       "verify_tree ran inside the loop with your 01, 02 and 09, which passed the greedy rows")
            self.fail("sampled check", mine(self.result.sources, ("07",)) or ["07"],
                      f"the sampled continuations do not follow the target's law (p = {p:.2g}){clue}; {context}")


def deep_trees(vocab: int = 64) -> list[tuple[str, list[int], list[int], torch.Tensor]]:
    """(name, tokens, parents, target_logits [n, vocab]) of trees whose target agrees along a long path: a chain of
    12 drafts, and 8 levels of 3 siblings whose agreeing child is the last, except at level 5, where the 2nd and
    3rd carry the same token (the 2nd is on the path). Every other node predicts token 0, which no node carries."""
    tokens, parents, path = [1], [-1], [0]
    for level in range(8):
        kids = [10 + 3 * level + j for j in range(3)]
        if level == 4:
            kids[2] = kids[1]
        path.append(len(tokens) + (1 if level == 4 else 2))
        tokens, parents = tokens + kids, parents + [path[-2]] * 3
    trees = [("a chain of 12 drafts, all accepted", list(range(1, 14)), [-1, *range(12)], list(range(13))),
             ("8 levels of 3 siblings, 8 accepted", tokens, parents, path)]
    out = []
    for name, toks, pars, agreed in trees:
        logits = torch.zeros(len(toks), vocab)
        logits[:, 0] = 1.0
        for a, b in zip(agreed, agreed[1:]):
            logits[a, 0], logits[a, toks[b]] = 0.0, 1.0
        out.append((name, toks, pars, logits))
    return out


@torch.inference_mode()
def exact_law(target: Transformer, prompt: list[int], n: int, temperature: float, top_k: int
              ) -> dict[tuple[int, ...], float]:
    """The probability of every n-token continuation plain sampling (`mini_llm.generate`) can draw."""
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(n):
        seqs = list(law)
        logits = target(torch.tensor([prompt + list(s) for s in seqs]))[:, -1]
        probs = logits_to_probs(logits, temperature, top_k, None)
        law = {s + (t,): law[s] * float(row[t]) for s, row in zip(seqs, probs) for t in row.nonzero().flatten().tolist()}
    return law


def sources_table(sources: dict[str, Source]) -> list[str]:
    who = {"yours": "yours", "file": "file", "solution": "solution", "package": "package (not solved yet)"}
    return [f"  {p.key}  {p.function:<21} {who[sources[p.key].kind]:<25} {p.role}" for p in PIECES]


def _timeline(cap: Capstone, spec: RowSpec, path: Path) -> None:
    """Plain decoding and the learner's `spec` row on the first prompt, as a Gantt chart at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    from tree_spec.analysis.timeline import Span, Timeline, record_plain
    from tree_spec.analysis.trace import RecordingTrace
    from tree_spec.ui.plots import draw_timeline

    prompt, n = cap.prompts[0], cap.plan.new_tokens
    plain = record_plain(cap.m.target, prompt, n)
    trace = RecordingTrace()
    pieces = Pieces(cap.result.sources, "prompt 0")
    out = decode(cap.m.target, spec.learner(pieces, Shadow(BY_KEY[spec.key], None)), prompt, n, pieces, spec.shape,
                 trace=trace)
    t0 = trace.spans[0].start_ms
    spans = [Span(s.kind, s.start_ms - t0, s.ms) for s in trace.spans if s.kind in ("prefill", "draft", "verify")]
    for span, step in zip([s for s in spans if s.kind == "verify"], out.steps):
        span.tokens = step.committed
    fig = draw_timeline(plain, Timeline(f"your {spec.name}", spans, out.output.tokens), n_tokens=min(24, n - 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _row_line(r: RowResult, plain: float, n: int) -> str:
    def part(identical: int, tokens: int, calls: int, ms: float) -> str:
        if not tokens:
            return f"{identical}/{n} {'—':>5} {'—':>6} {'—':>6}"
        return f"{identical}/{n} {tokens / calls:5.2f} {ms / tokens:6.2f} {plain / (ms / tokens):5.2f}x"
    mark = "   FAILED (the row and its package loop stop at its first failure)" if r.failed else ""
    return (f"  {r.spec.key} {r.spec.name:<27} {r.spec.form:<36} {part(r.identical, r.tokens, r.target_calls, r.ms)}"
            f"   {part(r.pkg_identical, r.pkg_tokens, r.pkg_calls, r.pkg_ms)}{mark}")


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
        log("\ngreedy rows: identical = prompts equal to plain decoding token for token; τ = tokens per target call;"
            "\nms/tok = thread CPU ms per token; speedup = plain ms/token / row ms/token (same run, interleaved)")
        log(f"  {'':2} {'drafter':<27} {'form':<36} {'yours: same  τ':<14} {'ms/tok':>6} {'speedup':>6}"
            f"   {'package loop: same τ':<20} {'ms/tok':>5} {'speedup':>6}")
        log(f"  {'':2} {'plain decoding (mini_llm)':<27} {'1 token / call':<36} {n}/{n}  1.00 {r.plain_ms_per_token:6.2f}  1.00x")
        for row in r.rows:
            log(_row_line(row, r.plain_ms_per_token, n))
        log("")
        cap.accept_walks()
        same = cap.tree_forward()
        log(f"tree forward (10): {same}/{plan.tree_forward_prompts} prompts identical to plain decoding, each pass "
            f"verified by tree_logits without a KV cache (small-model tree [2, 2, 1, 1])")
        cap.sampled()
        best = r.best()
        if best is not None:
            r.figure = settings.workspace / "capstone-timeline.png"
            _timeline(cap, best.spec, r.figure)
    theirs = [k for k in (p.key for p in PIECES) if sources[k].kind in ("yours", "file", "solution")]
    identical = all(row.identical == n for row in r.rows) and same == plan.tree_forward_prompts
    rules = not any(f.check.endswith(" row") or f.check == "acceptance walk" for f in r.failures)
    log(f"\nsummary: pieces from {'the solutions' if any(s.kind == 'solution' for s in sources.values()) else 'you'}: "
        f"{' '.join(theirs) or 'none'}; package: {' '.join(k for k in BY_KEY if k not in theirs) or 'none'}")
    sampled_ok = r.sampling_p is not None and r.sampling_p > P_MIN
    log(f"  greedy outputs identical to plain decoding: {'yes' if identical else 'no'}; drafts and accepted paths "
        f"follow the exercises' rules: {'yes' if rules else 'no'}; sampled check: {'pass' if sampled_ok else 'FAIL'}")
    if best is not None:
        log(f"  best speedup: {r.plain_ms_per_token / (best.ms / best.tokens):.2f}x ({best.spec.name}, "
            f"τ {best.tokens / best.target_calls:.2f}); timeline: {r.figure}")
    r.passed = r.ok and identical and rules and sampled_ok  # from the counts too, not only the failure list
    log(f"  {'PASS' if r.passed else 'FAIL'} in {time.perf_counter() - started:.0f} s")
    return r


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

