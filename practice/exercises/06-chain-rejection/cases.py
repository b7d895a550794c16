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
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("verify_chain",)
NEEDS_MODEL = False
V, K, TRIALS = 3, 2, 5000
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


def _valid(out: Any, k: int) -> str | None:
    if isinstance(out, tuple) and len(out) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in out) \
            and 0 <= out[0] <= k and 0 <= out[1] < V:
        return None
    return f"verify_chain must return (n_accepted, next_token) as two ints (0 <= n_accepted <= k), got {describe(out)}."


def _steps(fns, draft, target, trials, seed, generator):
    """Run `trials` freshly drafted steps -> list of (drafts, n, next) or a str when an output is malformed."""
    g_draft = torch.Generator().manual_seed(seed)
    drafts = torch.stack([torch.multinomial(d, trials, replacement=True, generator=g_draft) for d in draft], 1).tolist() \
        if len(draft) else [[] for _ in range(trials)]
    out = []
    for tokens in drafts:
        result = fns.verify_chain(list(tokens), draft.clone(), target.clone(), generator)
        problem = _valid(result, len(tokens))
        if problem:
            return problem
        out.append((tokens, *result))
    return out


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
        return torch.bincount(torch.tensor([nxt for _, _, nxt in steps]), minlength=V).float()
    g_fill = torch.Generator().manual_seed(99)
    counts = torch.zeros(V ** (K + 1))
    for tokens, n, nxt in steps:
        seq = tokens[:n] + [nxt]
        while len(seq) < K + 1:
            seq.append(int(torch.multinomial(target[len(seq)], 1, generator=g_fill)))
        counts[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    return counts


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
    if kind == "empty":
        return counts_mismatch(got, expected, "bonus tokens with no drafts (they must follow target_probs[0])")
    return counts_mismatch(got, expected, "emitted sequences (index = 9*a + 3*b + c)")


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
