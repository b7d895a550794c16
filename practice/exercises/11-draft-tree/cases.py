"""Draft tree from a ModelDrafter on the real model: tokens, parents exact; one call per level.

Mistakes modelled: parent = frontier position, children lowest-first, only the first frontier node expanded.
Drafter calls are counted by a wrapper around `next_logits` whose count the learner's code cannot reach.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.guard import count_calls
from practice.judgekit.compare import describe, int_mismatch, tokens_mismatch
from practice.judgekit.spec import Case, Context, Mistake
from tree_spec import ModelDrafter

FUNCTIONS = ("build_tree",)
NEEDS_MODEL = True
CONTEXT = [112, 9, 3020, 44, 871, 15, 266]
ROOT = 530


BRANCHINGS = ([2, 2, 1, 1], [3, 1], [1, 1, 1], [], [1, 1, 1, 1, 1, 1], [6], [2, 3, 2], [1, 4, 1, 2])
RULES = {
    "one drafter call per level": [f"branching {b}" for b in BRANCHINGS],
    "every frontier node gets its top-w_l children": ["branching [2, 2, 1, 1]", "branching [2, 3, 2]"],
    "children from the highest logit down": ["branching [3, 1]", "branching [6]"],
    "a child's parent is the frontier node's id": ["branching [2, 2, 1, 1]", "branching [1, 4, 1, 2]"],
    "new frontier = the nodes just added, in order": ["branching [2, 3, 2]", "branching [1, 4, 1, 2]"],
    "an empty branching: the root alone, no call": ["branching []"],
    "any number of levels": ["branching [1, 1, 1, 1, 1, 1]"],
    "context and branching are not modified (checked after every call)": ["branching [2, 2, 1, 1]"],
}


def cases(ctx: Context) -> list[Case]:
    return [Case(f"branching {b}", {"branching": b}, f"context of {len(CONTEXT)} tokens, root {ROOT}")
            for b in BRANCHINGS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {tokens, parents, calls} or a str when the result is not (list, list)."""
    drafter = ModelDrafter(ctx.model())
    drafter.reset(64)
    calls = count_calls(drafter, "next_logits")
    out = fns.build_tree(drafter, list(CONTEXT), ROOT, list(case.args["branching"]))
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"build_tree must return (tokens, parents), got {describe(out)}."
    return {"tokens": out[0], "parents": out[1], "calls": len(calls)}


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    problem = tokens_mismatch(got["parents"], expected["parents"], "parents") or tokens_mismatch(
        got["tokens"], expected["tokens"], "tokens")
    if problem:
        return problem
    return int_mismatch(got["calls"], expected["calls"], "drafter calls (one per level)")


def _grow(drafter, context, root, branching, parent_of, order, expand_first_only=False):
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, frontier)
        kids = order(logits, width)
        new = []
        for j, (node, row) in enumerate(zip(frontier, kids)):
            if expand_first_only and j > 0:
                break
            for token in row:
                new.append(len(tokens))
                tokens.append(token)
                parents.append(parent_of(node, j))
        frontier = new
    return tokens, parents


def _top(logits, width):
    return logits.topk(width, dim=-1).indices.tolist()


MISTAKES = [
    Mistake("a child's parent must be the frontier node's id in tokens, not its position in the frontier list.",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: j, _top)}),
    Mistake("children are in increasing logit order; take them from the highest logit down (topk order).",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: node,
                                                    lambda lg, w: lg.topk(w, dim=-1).indices.flip(-1).tolist())}),
    Mistake("only the first frontier node was expanded; every frontier node gets its top-w children.",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: node, _top, True)}),
]
