"""Node count and verify tokens, exact; mistakes: last level only, root counted, root forgotten, sum of widths,
a batch default other than 1."""
import math
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import describe, int_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

FUNCTIONS = ("tree_size",)
NEEDS_MODEL = False

# (branching, batch); batch None: called without it (the default, 1)
SETUPS = [([2, 2, 1, 1], 64), ([3, 3, 2], 64), ([1, 1, 1, 1], 1), ([4], 8), ([2, 3], 16),
          ([2, 2, 1, 1], None), ([], 1), ([], 3), ([2, 1, 1, 1, 1, 1, 1, 1], 2), ([1] * 10, None), ([8, 8, 8], 1),
          ([1, 5, 2], 5)]
RULES = {
    "the tree holds every level (not the last one)": ["[2, 2, 1, 1] at batch 64", "[1, 5, 2] at batch 5"],
    "level l holds w1 * ... * w_l nodes (products, not widths)": ["[3, 3, 2] at batch 64", "[8, 8, 8] at batch 1"],
    "the root is not a drafted node": ["[4] at batch 8", "[1, 1, 1, 1] at batch 1"],
    "verify tokens = batch * (nodes + 1)": ["[2, 2, 1, 1] at batch 64", "[2, 3] at batch 16"],
    "batch defaults to 1": ["[2, 2, 1, 1] (default batch)", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1] (default batch)"],
    "an empty branching is a bare root: (0, batch)": ["[] at batch 1", "[] at batch 3"],
    "any number of levels": ["[2, 1, 1, 1, 1, 1, 1, 1] at batch 2", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1] (default batch)"],
    "branching is not modified (checked after every call)": ["[2, 2, 1, 1] at batch 64"],
}
LIMITS = [Limit("at batch 64", 64, lambda c: c.args["batch"] or 1),
          Limit("ten levels", 10, lambda c: len(c.args["branching"])),
          Limit("an empty `branching`", 0, lambda c: len(c.args["branching"]), at_most=True)]


def _name(branching: list[int], batch: int | None) -> str:
    return f"{branching} at batch {batch}" if batch is not None else f"{branching} (default batch)"


def cases(ctx: Context) -> list[Case]:
    return [Case(_name(b, n), {"branching": b, "batch": n}, "") for b, n in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    if case.args["batch"] is None:
        return fns.tree_size(list(case.args["branching"]))
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
    Mistake("`batch` must default to 1 (one request) when it is not given.",
            {"tree_size": lambda b, n=64: (_nodes(b), n * (_nodes(b) + 1))}),
]
MISTAKES = with_rules(MISTAKES, RULES, [0, 2, 3, 1, 4])  # the README rule each mistake breaks
