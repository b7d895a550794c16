"""Confidence-stopped chain from a ModelDrafter on the real model: tokens, parents exact; one call per draft.

Mistakes modelled: the threshold applied to each draft's own probability (not the path product), the draft
that crosses theta dropped instead of kept, raw logits compared with theta (no softmax), q <= theta instead of
q < theta. Drafter calls are counted by a wrapper around `next_logits` whose count the learner cannot reach.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.guard import count_calls
from practice.judgekit.compare import describe, int_mismatch, tokens_mismatch
from practice.judgekit.drafters import ExactDrafter
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from practice.judgekit.values import as_ints
from tree_spec import ModelDrafter

FUNCTIONS = ("confident_chain",)
NEEDS_MODEL = True
# token ids of two Python snippets ("... for name in os.listdir(argv[1]):\n        print(" and
# 'if __name__ == "__main__":\n    '): the context, then the root
CONTEXTS = {
    "listdir": ([609, 541, 199, 609, 660, 589, 199, 534, 2263, 8, 2854, 289, 278, 382, 545, 324, 541, 14, 508, 548, 8,
                 2854, 59, 17, 3307, 262, 1031], 8),
    "main": ([800, 526, 374, 314, 567, 1646, 798, 2995], 260),
}
SETTINGS = [(6, 0.3), (8, 0.5), (4, 0.0), (8, 0.1), (6, 0.7)]  # theta 0.7: the first draft (p ~ 0.52, 0.61) crosses
# exact-drafter settings (k, theta): its every draft has probability exactly 0.5, so q = 0.5 ** i exactly
EXACT_SETTINGS = [(6, 0.25), (4, 0.5), (5, 0.6), (0, 0.3), (7, 0.0)]


def _either_tied(got_tokens: Any, expected: list[int]) -> Any:
    """Learner tokens of an exact-draft case with each draft that picked the other of its two tied tokens (the
    greedy draft may break the 0.5/0.5 tie either way: argmax takes the lower id, topk(1) may not) replaced by the
    expected one, so only the stop rule is graded."""
    tokens = as_ints(got_tokens)
    if tokens is None:
        return got_tokens
    return [want if 0 < i < len(expected) and t != want and t in ExactDrafter.tied(i - 1) else t
            for i, (t, want) in enumerate(zip(tokens, expected + [None] * len(tokens)))]


RULES = {
    "q = the PRODUCT of the drafts' probabilities (softmax, temperature 1)": ["listdir context, k=6, theta=0.3",
                                                                            "main context, k=8, theta=0.1"],
    "stop once q < theta (strict: q == theta continues)": ["exact draft, k=6, theta=0.25", "exact draft, k=4, theta=0.5"],
    "the draft that crosses theta is kept": ["listdir context, k=6, theta=0.7", "exact draft, k=5, theta=0.6"],
    "at most k drafts": ["listdir context, k=4, theta=0.0", "exact draft, k=7, theta=0.0"],
    "k = 0: the root alone, no call": ["exact draft, k=0, theta=0.3"],
    "one drafter call per draft": ["listdir context, k=6, theta=0.3", "exact draft, k=7, theta=0.0"],
    "context is not modified (checked after every call)": ["listdir context, k=6, theta=0.3"],
}
LIMITS = [Limit("k = 7 with theta = 0", 7, lambda c: c.args["k"] if c.args["theta"] == 0 else 0),
          Limit("k = 0 (the root alone, no call)", 0, lambda c: c.args["k"], at_most=True)]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{name} context, k={k}, theta={theta}", {"context": name, "k": k, "theta": theta},
                 f"context of {len(CONTEXTS[name][0])} tokens, root {CONTEXTS[name][1]}")
            for name in CONTEXTS for k, theta in SETTINGS] + [
        Case(f"exact draft, k={k}, theta={theta}", {"context": "exact", "k": k, "theta": theta},
             "every draft has probability exactly 0.5") for k, theta in EXACT_SETTINGS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {tokens, parents, calls} or a str when the result is not (list, list)."""
    if case.args["context"] == "exact":
        drafter, (context, root) = ExactDrafter(), (CONTEXTS["main"][0], 7)
    else:
        drafter, (context, root) = ModelDrafter(ctx.model()), CONTEXTS[case.args["context"]]
    drafter.reset(64)
    calls = count_calls(drafter, "next_logits", "next_top")
    out = fns.confident_chain(drafter, list(context), root, case.args["k"], case.args["theta"])
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"confident_chain must return (tokens, parents), got {describe(out)}."
    return {"tokens": out[0], "parents": out[1], "calls": len(calls)}


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    tokens = _either_tied(got["tokens"], expected["tokens"]) if case.args["context"] == "exact" else got["tokens"]
    problem = tokens_mismatch(tokens, expected["tokens"], "tokens") or tokens_mismatch(
        got["parents"], expected["parents"], "parents")
    if problem:
        return problem
    return int_mismatch(got["calls"], expected["calls"], "drafter calls (one per draft)")


def _chain(drafter, context, root, k, theta, score, keep_crossing=True, below=lambda q, theta: q < theta):
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])[0].float()
        token = int(logits.argmax())
        q = score(q, logits, token)
        if below(q, theta) and not keep_crossing:
            break
        parents.append(len(tokens) - 1)
        tokens.append(token)
        if below(q, theta):
            break
    return tokens, parents


def _path(q, logits, token):
    return q * float(logits.softmax(-1)[token])


MISTAKES = [
    Mistake("the path probability is the PRODUCT of the drafts' probabilities so far, not the last draft's own "
            "probability.",
            {"confident_chain": lambda d, c, r, k, t: _chain(d, c, r, k, t, lambda q, lg, tok: float(lg.softmax(-1)[tok]))}),
    Mistake("the draft that takes the path probability below theta is still part of the chain (it is verified; it "
            "only gets no successor).",
            {"confident_chain": lambda d, c, r, k, t: _chain(d, c, r, k, t, _path, keep_crossing=False)}),
    Mistake("compare probabilities (softmax of the logits) with theta, not raw logits.",
            {"confident_chain": lambda d, c, r, k, t: _chain(d, c, r, k, t, lambda q, lg, tok: q * float(lg[tok]))}),
    Mistake("the chain stopped at q == theta; stop only once q < theta (strictly below), with q the product of the "
            "drafts' probabilities (a float32 sum of log-probs, exp'd or compared with log(theta), lands just below "
            "theta when q == theta).",
            {"confident_chain": lambda d, c, r, k, t: _chain(d, c, r, k, t, _path, below=lambda q, theta: q <= theta)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [0, 2, 0, 1])  # the README rule each mistake breaks
