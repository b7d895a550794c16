"""Depths (exact list) and positions (exact int64 tensor); mistakes: index positions, off by one. Depths that stop
growing at some level (a fixed number of parent hops) are named by `check`, whatever the level."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import describe, tensor_mismatch, tokens_mismatch
from practice.judgekit.gen import DEEPEST, tree_suite
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from tree_spec.core.topology import depths

FUNCTIONS = ("depths_and_positions",)
NEEDS_MODEL = False

TREES = [
    ("six-node tree", [-1, 0, 0, 1, 1, 2], 5),
    ("chain", [-1, 0, 1, 2], 12),
    ("wide tree [2,2,1,1]", [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10], 30),
    ("uneven tree", [-1, 0, 1, 1, 0, 4, 2, 6, 3, 5], 0),
    *((name, parents, prefix) for (name, parents), prefix in zip(tree_suite(seed=2), (0, 7, 1, 100, 3, 9, 4096))),
]
RULES = {
    "the root has depth 0": [name for name, _, _ in TREES],
    "a node's depth is its parent's + 1, however deep": ["chain", "deep chain of 9", "deep random tree of 20",
                                                        f"random tree of 70, {DEEPEST} levels"],
    "position = prefix_len + depth (the root at prefix_len)": [name for name, _, _ in TREES],
    "siblings share a position (depth, not index)": ["six-node tree", "wide star of 12", "random tree of 12"],
    "depths a list of ints, positions an int64 tensor": [name for name, _, _ in TREES],
    "prefix_len 0 and a one-node tree": ["uneven tree", "single node"],
    "any size (no fixed buffer)": [f"random tree of 70, {DEEPEST} levels"],
    "parents is not modified (checked after every call)": [name for name, _, _ in TREES],
}
LIMITS = [Limit("random trees of up to 70 nodes and 22 levels", 70, lambda c: len(c.args["parents"])),
          Limit("random trees of up to 70 nodes and 22 levels", DEEPEST, lambda c: max(depths(c.args["parents"]))),
          Limit("`prefix_len` from 0 to 4096", 4096, lambda c: c.args["prefix_len"]),
          Limit("`prefix_len` from 0 to 4096", 0, lambda c: c.args["prefix_len"], at_most=True)]


def cases(ctx: Context) -> list[Case]:
    return [Case(name, {"parents": p, "prefix_len": n}, f"parents={p}, prefix_len={n}") for name, p, n in TREES]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.depths_and_positions(list(case.args["parents"]), case.args["prefix_len"])


def check(got: Any, expected: Any, case: Case) -> str | None:
    if not isinstance(got, tuple) or len(got) != 2:
        return f"expected a tuple (depths, positions), got {describe(got)}."
    problem = tokens_mismatch(got[0], expected[0], "depths")
    if problem and isinstance(got[0], list) and len(got[0]) == len(expected[0]) and all(
            isinstance(d, int) for d in got[0]):
        wrong = [i for i, (g, e) in enumerate(zip(got[0], expected[0])) if g != e]
        cap = got[0][wrong[0]]
        if cap > 0 and all(got[0][i] == cap < expected[0][i] for i in wrong):
            return (f"{problem} Depths stop growing at {cap} (node {wrong[0]} is {expected[0][wrong[0]]} levels deep): "
                    f"a node's depth is its parent's + 1 at every level, however deep (no fixed number of parent "
                    f"hops, no table of fixed size). Rule: a node's depth is its parent's + 1, however deep.")
    return problem or tensor_mismatch(got[1], expected[1], "positions")


def _index_positions(parents, prefix_len):
    return depths(parents), torch.arange(prefix_len, prefix_len + len(parents))


def _one_late(parents, prefix_len):
    return depths(parents), torch.tensor([prefix_len + 1 + d for d in depths(parents)])


def _root_depth_one(parents, prefix_len):
    d = [x + 1 for x in depths(parents)]
    return d, torch.tensor([prefix_len + x for x in d])


MISTAKES = [
    Mistake("positions follow the node's index in the list; they must follow its depth (prefix_len + depth), "
            "so siblings share a position.", {"depths_and_positions": _index_positions}),
    Mistake("positions are off by one: the root sits at prefix_len (the prefix uses 0 .. prefix_len - 1), "
            "so a node's position is prefix_len + depth.", {"depths_and_positions": _one_late}),
    Mistake("depths are off by one: the root has depth 0, not 1.", {"depths_and_positions": _root_depth_one}),
]
MISTAKES = with_rules(MISTAKES, RULES, [3, 2, 0])  # the README rule each mistake breaks
