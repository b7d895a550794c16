"""Node count and verify tokens, exact; mistakes: last level only, root counted, root forgotten, sum of widths."""
import math
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import describe, int_mismatch
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("tree_size",)
NEEDS_MODEL = False

SETUPS = [([2, 2, 1, 1], 64), ([3, 3, 2], 64), ([1, 1, 1, 1], 1), ([4], 8), ([2, 3], 16)]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{b} at batch {n}", {"branching": b, "batch": n}, "") for b, n in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.tree_size(list(case.args["branching"]), case.args["batch"])


def check(got: Any, expected: Any, case: Case) -> str | None:
    if not isinstance(got, tuple) or len(got) != 2:
        return f"expected a tuple (nodes, verify_tokens), got {describe(got)}."
    return int_mismatch(got[0], expected[0], "nodes") or int_mismatch(got[1], expected[1], "verify tokens")


def _nodes(branching):
    return sum(math.prod(branching[: i + 1]) for i in range(len(branching)))


MISTAKES = [
    Mistake("that is the last level only (the leaves); the tree holds every level: w1 + w1*w2 + ...",
            {"tree_size": lambda b, n=1: (math.prod(b), n * (math.prod(b) + 1))}),
    Mistake("the node count includes the root; count the drafted nodes only (the root is added once in the "
            "verify tokens).", {"tree_size": lambda b, n=1: (_nodes(b) + 1, n * (_nodes(b) + 1))}),
    Mistake("the verify tokens forget the root: each request feeds its root and its nodes, batch * (nodes + 1).",
            {"tree_size": lambda b, n=1: (_nodes(b), n * _nodes(b))}),
    Mistake("that is the sum of the widths; level l holds the product w1 * ... * w_l nodes.",
            {"tree_size": lambda b, n=1: (sum(b), n * (sum(b) + 1))}),
]
