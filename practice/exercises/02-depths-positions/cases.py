"""Depths (exact list) and positions (exact int64 tensor); mistakes: index positions, off by one."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import describe, tensor_mismatch, tokens_mismatch
from practice.judgekit.gen import tree_suite
from practice.judgekit.spec import Case, Context, Mistake

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
    "a node's depth is its parent's + 1, however deep": ["chain", "deep chain of 9", "deep random tree of 20"],
    "position = prefix_len + depth (the root at prefix_len)": [name for name, _, _ in TREES],
    "siblings share a position (depth, not index)": ["six-node tree", "wide star of 12", "random tree of 12"],
    "depths a list of ints, positions an int64 tensor": [name for name, _, _ in TREES],
    "prefix_len 0 and a one-node tree": ["uneven tree", "single node"],
    "any size (no fixed buffer)": ["random tree of 70"],
    "parents is not modified (checked after every call)": [name for name, _, _ in TREES],
}


def cases(ctx: Context) -> list[Case]:
    return [Case(name, {"parents": p, "prefix_len": n}, f"parents={p}, prefix_len={n}") for name, p, n in TREES]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.depths_and_positions(list(case.args["parents"]), case.args["prefix_len"])


def check(got: Any, expected: Any, case: Case) -> str | None:
    if not isinstance(got, tuple) or len(got) != 2:
        return f"expected a tuple (depths, positions), got {describe(got)}."
    return tokens_mismatch(got[0], expected[0], "depths") or tensor_mismatch(got[1], expected[1], "positions")


def _depths(parents):
    d = [0] * len(parents)
    for i in range(1, len(parents)):
        d[i] = d[parents[i]] + 1
    return d


def _index_positions(parents, prefix_len):
    return _depths(parents), torch.arange(prefix_len, prefix_len + len(parents))


def _one_late(parents, prefix_len):
    return _depths(parents), torch.tensor([prefix_len + 1 + d for d in _depths(parents)])


def _depth_capped(parents, prefix_len):
    d = [min(x, 4) for x in _depths(parents)]
    return d, torch.tensor([prefix_len + x for x in d])


def _root_depth_one(parents, prefix_len):
    d = [x + 1 for x in _depths(parents)]
    return d, torch.tensor([prefix_len + x for x in d])


MISTAKES = [
    Mistake("positions follow the node's index in the list; they must follow its depth (prefix_len + depth), "
            "so siblings share a position.", {"depths_and_positions": _index_positions}),
    Mistake("positions are off by one: the root sits at prefix_len (the prefix uses 0 .. prefix_len - 1), "
            "so a node's position is prefix_len + depth.", {"depths_and_positions": _one_late}),
    Mistake("depths are off by one: the root has depth 0, not 1.", {"depths_and_positions": _root_depth_one}),
    Mistake("depths stop growing at 4: a node's depth is its parent's depth + 1 at every level, however deep.",
            {"depths_and_positions": _depth_capped}),
]
