"""Confidence-stopped chain from a ModelDrafter on the real model: tokens, parents exact; one call per draft.

Mistakes modelled: the threshold applied to each draft's own probability (not the path product), the draft
that crosses theta dropped instead of kept, raw logits compared with theta (no softmax).
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import describe, int_mismatch, tokens_mismatch
from practice.judgekit.spec import Case, Context, Mistake
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
SETTINGS = [(6, 0.3), (8, 0.5), (4, 0.0), (8, 0.1)]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{name} context, k={k}, theta={theta}", {"context": name, "k": k, "theta": theta},
                 f"context of {len(CONTEXTS[name][0])} tokens, root {CONTEXTS[name][1]}")
            for name in CONTEXTS for k, theta in SETTINGS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {tokens, parents, calls} or a str when the result is not (list, list)."""
    drafter = ModelDrafter(ctx.model())
    drafter.reset(64)
    context, root = CONTEXTS[case.args["context"]]
    out = fns.confident_chain(drafter, list(context), root, case.args["k"], case.args["theta"])
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"confident_chain must return (tokens, parents), got {describe(out)}."
    return {"tokens": out[0], "parents": out[1], "calls": drafter.calls}


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    problem = tokens_mismatch(got["tokens"], expected["tokens"], "tokens") or tokens_mismatch(
        got["parents"], expected["parents"], "parents")
    if problem:
        return problem
    return int_mismatch(got["calls"], expected["calls"], "drafter calls (one per draft)")


def _chain(drafter, context, root, k, theta, score, keep_crossing=True):
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])[0].float()
        token = int(logits.argmax())
        q = score(q, logits, token)
        if q < theta and not keep_crossing:
            break
        parents.append(len(tokens) - 1)
        tokens.append(token)
        if q < theta:
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
]
