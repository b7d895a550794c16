"""Chain verification, statistical: the completed 3-token sequence must follow the target's law.

Test: Pearson chi-square (tree_spec.chi_square) of 5000 seeded steps against the exact law,
pass if p >= 0.001. Mistakes modelled: inverted ratio, correction from the target, wrong bonus row.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("verify_chain",)
NEEDS_MODEL = False
V, K, TRIALS = 3, 2, 5000
DRAFT = torch.tensor([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]])
TARGET = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.4, 0.1], [0.3, 0.6, 0.1]])


def cases(ctx: Context) -> list[Case]:
    return [
        Case("imperfect draft", {"draft": DRAFT, "target": TARGET, "seed": 0, "trials": TRIALS},
             f"k = {K}, V = {V}, {TRIALS} steps, chi-square p >= 0.001"),
        Case("perfect draft", {"draft": TARGET[:K], "target": TARGET, "seed": 1, "trials": 300},
             "draft == target: every draft must be accepted"),
    ]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> counts [V**3] of completed sequences (imperfect) or of n_accepted [K + 1] (perfect); str if malformed."""
    draft, target = case.args["draft"], case.args["target"]
    trials = ctx.trials(case.args["trials"]) if case.name == "imperfect draft" else case.args["trials"]
    g_draft, g_fill = torch.Generator().manual_seed(case.args["seed"]), torch.Generator().manual_seed(99)
    generator = torch.Generator().manual_seed(case.args["seed"] + 1000)
    drafts = torch.stack([torch.multinomial(d, trials, replacement=True, generator=g_draft) for d in draft], 1).tolist()
    perfect = case.name == "perfect draft"
    counts = torch.zeros(K + 1 if perfect else V ** (K + 1))
    for tokens in drafts:
        out = fns.verify_chain(tokens, draft.clone(), target.clone(), generator)
        if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(v, int) for v in out) and 0 <= out[0] <= K):
            return f"verify_chain must return (n_accepted, next_token) as two ints, got {describe(out)}."
        n, nxt = out
        if perfect:
            counts[n] += 1
            continue
        seq = tokens[:n] + [nxt]
        while len(seq) < K + 1:
            seq.append(int(torch.multinomial(target[len(seq)], 1, generator=g_fill)))
        counts[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    return counts


def expected(case: Case, ctx: Context) -> torch.Tensor:
    target = case.args["target"]
    if case.name == "perfect draft":
        return torch.tensor([0.0] * K + [float(case.args["trials"])])
    return torch.einsum("a,b,c->abc", target[0], target[1], target[2]).flatten()


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    if case.name == "perfect draft":
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and got[K] == expected[K]:
            return None
        return (f"with draft == target every draft token must be accepted (probability min(1, 1) = 1), but "
                f"n_accepted was below {K} in {int(expected[K] - got[K])} of {int(expected[K])} steps.")
    return counts_mismatch(got, expected, "emitted sequences (index = 9*a + 3*b + c)")


def _verify(draft_tokens, draft_probs, target_probs, generator, accept, correction, bonus_row):
    for i, x in enumerate(draft_tokens):
        if not accept(torch.rand((), generator=generator).item(), target_probs[i, x].item(), draft_probs[i, x].item()):
            return i, int(torch.multinomial(correction(target_probs[i], draft_probs[i]), 1, generator=generator))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[bonus_row(k)], 1, generator=generator))


def _residual(t, d):
    x = (t - d).clamp_min(0)
    return x / x.sum() if x.sum() > 0 else t


def _rule(u, t, d):
    return u * d < t


MISTAKES = [
    Mistake("the acceptance ratio is inverted: accept with probability min(1, target / draft), i.e. "
            "u * draft < target.", {"verify_chain": lambda *a: _verify(*a, lambda u, t, d: u * t < d, _residual, lambda k: k)}),
    Mistake("after a rejection the token is sampled from target_probs[i]; it must come from the residual "
            "norm(max(0, target - draft)) of that position.",
            {"verify_chain": lambda *a: _verify(*a, _rule, lambda t, d: t, lambda k: k)}),
    Mistake("the bonus token (all drafts accepted) must come from the last row target_probs[k], not "
            "target_probs[k - 1].", {"verify_chain": lambda *a: _verify(*a, _rule, _residual, lambda k: k - 1)}),
]
