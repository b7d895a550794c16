"""Chain verification, statistical: the completed 3-token sequence must follow the target's law.

Test: Pearson chi-square (tree_spec.chi_square) of 5000 seeded steps against the exact law, pass if
p >= 0.001. Each modelled mistake moves that law by >= 0.05 in total variation (`chain_law` computes the
exact law of every variant; tests/test_judge_rules.py checks the distances). Also graded: a perfect draft
accepts everything, no drafts (k = 0) gives the bonus from target_probs[0], and the draws are reproducible
from `generator` alone (judgekit.repro).
"""
from itertools import product
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.repro import draw_check, draw_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from practice.judgekit.values import TYPE_POLICY, as_int
from tree_spec.analysis.stats import chi_square

FUNCTIONS = ("verify_chain",)
NEEDS_MODEL = False
V, K, TRIALS, REPRO_RUNS = 3, 2, 5000, 1000
DRAFT = torch.tensor([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]])
TARGET = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.4, 0.1], [0.1, 0.8, 0.1]])
RULES = {
    "accept x with probability min(1, target/draft)": ["imperfect draft", "perfect draft"],
    "at the first rejection, the next token from the residual of that position": ["imperfect draft"],
    "all accepted: the bonus from target_probs[k]": ["imperfect draft", "no drafts (k = 0)"],
    "(n_accepted, next_token) as two ints": ["imperfect draft", "perfect draft", "no drafts (k = 0)"],
    "every random number from `generator`": ["reproducible draws"],
    "the inputs are not modified (checked after every call)": ["imperfect draft", "no drafts (k = 0)"],
}
LIMITS = [Limit("k = 2, V = 3, 5000 steps", 5000, lambda c: c.args["trials"] if c.args["kind"] == "law" else 0),
          Limit("no drafts at all (k = 0", 0, lambda c: 0 if c.args["kind"] == "empty" else K, at_most=True)]


def cases(ctx: Context) -> list[Case]:
    return [
        Case("imperfect draft", {"kind": "law", "seed": 0, "trials": TRIALS},
             f"k = {K}, V = {V}, {TRIALS} steps, chi-square p >= 0.001"),
        Case("perfect draft", {"kind": "perfect", "seed": 1, "trials": 300},
             "draft == target: every draft must be accepted"),
        Case("no drafts (k = 0)", {"kind": "empty", "seed": 2, "trials": 500},
             "draft_probs [0, V], target_probs [1, V]: the bonus token from target_probs[0]"),
        Case("reproducible draws", {"kind": "repro", "seed": 3, "trials": 100},
             "same generator seed -> same draws, whatever the global RNGs; another seed -> other draws"),
    ]


def _valid(out: Any, k: int) -> tuple[int, int] | str:
    """(n_accepted, next_token) as ints (judgekit.values' policy), or what is wrong."""
    ints = [as_int(v) for v in out] if isinstance(out, tuple) and len(out) == 2 else [None]
    if None not in ints and 0 <= ints[0] <= k and 0 <= ints[1] < V:
        return ints[0], ints[1]
    return (f"verify_chain must return (n_accepted, next_token) as two ints (0 <= n_accepted <= k), got "
            f"{describe(out)}; {TYPE_POLICY}.")


def _steps(fns, draft, target, trials, seed, generator):
    """Run `trials` freshly drafted steps -> list of (drafts, n, next) or a str when an output is malformed."""
    g_draft = torch.Generator().manual_seed(seed)
    drafts = torch.stack([torch.multinomial(d, trials, replacement=True, generator=g_draft) for d in draft], 1).tolist() \
        if len(draft) else [[] for _ in range(trials)]
    out = []
    for tokens in drafts:
        result = _valid(fns.verify_chain(list(tokens), draft.clone(), target.clone(), generator), len(tokens))
        if isinstance(result, str):
            return result
        out.append((tokens, *result))
    return out


def outcome_law(tokens: list[int], draft: torch.Tensor, target: torch.Tensor) -> dict[tuple[int, int], float]:
    """The rule's exact law of (n_accepted, next_token) for these draft tokens."""
    law, reach = {}, 1.0
    for i, x in enumerate(tokens):
        accept = min(1.0, float(target[i, x] / draft[i, x]))
        for t, prob in enumerate(_residual(target[i].double(), draft[i].double()).tolist()):
            law[i, t] = law.get((i, t), 0.0) + reach * (1 - accept) * prob
        reach *= accept
    for t, prob in enumerate(target[len(tokens)].double().tolist()):
        law[len(tokens), t] = law.get((len(tokens), t), 0.0) + reach * prob
    return law


def _repro(fns, steps, draft, target, seed) -> dict[str, Any] | str:
    """The draft tokens whose outcomes in `steps` stray farthest from the rule's exact law (the smallest chi-square
    p among those drafted at least 20 times), run REPRO_RUNS times with a generator seeded seed + 2000."""
    groups, best, best_p = {}, None, 2.0
    for tokens, n, nxt in steps:
        groups.setdefault(tuple(tokens), []).append((n, nxt))
    for tokens, outcomes in groups.items():
        if len(outcomes) >= 20:
            law = outcome_law(list(tokens), draft, target)
            cells = sorted(set(law) | set(outcomes))
            _, p = chi_square(torch.tensor([float(outcomes.count(c)) for c in cells]),
                              torch.tensor([law.get(c, 0.0) + 1e-9 for c in cells], dtype=torch.float64))
            if p < best_p:
                best, best_p = list(tokens), p
    tokens, generator, runs = best or list(steps[0][0]), torch.Generator().manual_seed(seed + 2000), []
    for _ in range(REPRO_RUNS):
        out = _valid(fns.verify_chain(list(tokens), draft.clone(), target.clone(), generator), len(tokens))
        if isinstance(out, str):
            return out
        runs.append(list(out))
    return {"tokens": tokens, "k": len(tokens), "seed": seed + 2000, "runs": runs}


def _rounded(t: torch.Tensor) -> list:
    return [[round(v, 4) for v in row] for row in t.tolist()]


def _rerun(repro: Any) -> str:
    """A failing case's re-runnable input: the learner's (n_accepted, next_token) counts beside the rule's."""
    if not isinstance(repro, dict):
        return f" Re-running one of its steps failed: {repro}" if isinstance(repro, str) else ""
    k = repro["k"]
    draft, target = (DRAFT, TARGET) if k else (torch.zeros(0, V), TARGET[K:])
    law, seen = outcome_law(repro["tokens"], draft, target), {}
    for n, t in repro["runs"]:
        seen[n, t] = seen.get((n, t), 0) + 1
    cells = sorted(set(law) | set(seen))
    gaps = sorted(cells, key=lambda c: -abs(seen.get(c, 0) - REPRO_RUNS * law.get(c, 0.0)))[:3]
    shown = "; ".join(f"({n}, {t}): expected {REPRO_RUNS * law.get((n, t), 0.0):.1f}, yours {seen.get((n, t), 0)}"
                      for n, t in gaps)
    return (f"\n      Re-run the step where your counts stray farthest: verify_chain({repro['tokens']}, "
            f"torch.tensor({_rounded(draft)}), torch.tensor({_rounded(target)}), "
            f"torch.Generator().manual_seed({repro['seed']})) {REPRO_RUNS} times; the largest gaps in (n_accepted, "
            f"next_token) counts: {shown}.")


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> counts (law: [V**3] completed sequences; perfect: [K + 1] n_accepted; empty: [V] next tokens),
    the reproducibility dict, or a str when an output is malformed."""
    kind, seed = case.args["kind"], case.args["seed"]
    if kind == "repro":
        return draw_check(lambda g: _steps(fns, DRAFT, TARGET, case.args["trials"], seed, g), seed + 1000)
    draft = {"law": DRAFT, "perfect": TARGET[:K], "empty": torch.zeros(0, V)}[kind]
    target = TARGET[K:] if kind == "empty" else TARGET
    trials = ctx.trials(case.args["trials"]) if kind == "law" else case.args["trials"]
    steps = _steps(fns, draft, target, trials, seed, torch.Generator().manual_seed(seed + 1000))
    if isinstance(steps, str):
        return steps
    if kind == "perfect":
        return torch.bincount(torch.tensor([n for _, n, _ in steps]), minlength=K + 1).float()
    if kind == "empty":
        counts = torch.bincount(torch.tensor([nxt for _, _, nxt in steps]), minlength=V).float()
        failing = check(counts, expected(case, ctx), case) is not None
        return (counts, _repro(fns, steps, draft, target, seed)) if failing else counts
    g_fill = torch.Generator().manual_seed(99)
    counts = torch.zeros(V ** (K + 1))
    for tokens, n, nxt in steps:
        seq = tokens[:n] + [nxt]
        while len(seq) < K + 1:
            seq.append(int(torch.multinomial(target[len(seq)], 1, generator=g_fill)))
        counts[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    failing = check(counts, expected(case, ctx), case) is not None  # a failing case brings a re-runnable input
    return (counts, _repro(fns, steps, draft, target, seed)) if failing else counts


def expected(case: Case, ctx: Context) -> Any:
    kind = case.args["kind"]
    if kind == "repro":
        return {"same seed, global RNGs reseeded: same draws": True, "another seed: other draws": True}
    if kind == "perfect":
        return torch.tensor([0.0] * K + [float(case.args["trials"])])
    if kind == "empty":
        return TARGET[K] * case.args["trials"]
    return chain_law()


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    kind = case.args["kind"]
    if kind == "repro":
        return draw_mismatch(got, expected, "verify_chain")
    if kind == "perfect":
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and got[K] == expected[K]:
            return None
        return (f"with draft == target every draft token must be accepted (probability min(1, 1) = 1), but "
                f"n_accepted was below {K} in {int(expected[K] - got[K])} of {int(expected[K])} steps.")
    counts, repro = got if isinstance(got, tuple) else (got, None)
    expected = expected[0] if isinstance(expected, tuple) else expected  # a recorded mistake's output
    if kind == "empty":
        problem = counts_mismatch(counts, expected, "bonus tokens with no drafts (they must follow target_probs[0])")
        rule = "Rule: all accepted: the bonus from target_probs[k] (here k = 0: target_probs[0])."
    else:
        problem = counts_mismatch(counts, expected, "emitted sequences (index = 9*a + 3*b + c)")
        rule = ("Rule: accept x with probability min(1, target/draft); at the first rejection, the next token from "
                "the residual of that position; all accepted, the bonus from target_probs[k].")
    return f"{problem} {rule}{_rerun(repro)}" if problem else None


def _residual(t, d):
    x = (t - d).clamp_min(0)
    return x / x.sum() if x.sum() > 0 else t


def _min_ratio(t: float, d: float) -> float:
    return min(1.0, t / d)


# mistake name -> (acceptance probability (t, d) -> float, correction (t_row, d_row) -> dist, bonus row (k) -> int)
RIGHT = (_min_ratio, _residual, lambda k: k)
VARIANTS = {
    "inverted ratio": (lambda t, d: min(1.0, d / t), _residual, lambda k: k),
    "correction from the target": (_min_ratio, lambda t, d: t, lambda k: k),
    "bonus from row k - 1": (_min_ratio, _residual, lambda k: k - 1),
    "accept when target >= draft": (lambda t, d: float(t >= d), _residual, lambda k: k),
}


def chain_law(accept=_min_ratio, correction=_residual, bonus_row=lambda k: k) -> torch.Tensor:
    """Exact law [V**3] of the completed sequence for DRAFT/TARGET, by enumerating the drafts."""
    t, d = TARGET.double(), DRAFT.double()
    law = torch.zeros(V, V, V, dtype=torch.float64)
    for x0, x1 in product(range(V), repeat=K):
        weight = float(d[0, x0] * d[1, x1])
        a0, a1 = accept(float(t[0, x0]), float(d[0, x0])), accept(float(t[1, x1]), float(d[1, x1]))
        law += weight * (1 - a0) * torch.einsum("a,b,c->abc", correction(t[0], d[0]), t[1], t[2])
        law[x0] += weight * a0 * (1 - a1) * torch.outer(correction(t[1], d[1]), t[2])
        law[x0, x1] += weight * a0 * a1 * t[bonus_row(K)]
    return law.flatten()


def _sampler(accept, correction, bonus_row):
    def verify_chain(draft_tokens, draft_probs, target_probs, generator):
        for i, x in enumerate(draft_tokens):
            if torch.rand((), generator=generator).item() >= accept(target_probs[i, x].item(), draft_probs[i, x].item()):
                return i, int(torch.multinomial(correction(target_probs[i], draft_probs[i]), 1, generator=generator))
        k = len(draft_tokens)
        return k, int(torch.multinomial(target_probs[bonus_row(k)], 1, generator=generator))
    return verify_chain


MESSAGES = {
    "inverted ratio": "the acceptance ratio is inverted: accept with probability min(1, target / draft), i.e. "
                      "u * draft < target.",
    "correction from the target": "after a rejection the token is sampled from target_probs[i]; it must come from "
                                  "the residual norm(max(0, target - draft)) of that position.",
    "bonus from row k - 1": "the bonus token (all drafts accepted) must come from the last row target_probs[k], "
                            "not target_probs[k - 1].",
    "accept when target >= draft": "a draft is accepted only when target >= draft, deterministically; accept it "
                                   "with probability min(1, target / draft) (draw u from `generator`).",
}
MISTAKES = [Mistake(MESSAGES[name], {"verify_chain": _sampler(*VARIANTS[name])}) for name in VARIANTS]
MISTAKES = with_rules(MISTAKES, RULES, [0, 1, 2, 0])  # the README rule each mistake breaks
