"""Tree mask: exact comparison; mistakes modelled: no diagonal, causal mask, transposed mask, parent only. A row
that misses only its farthest ancestors (a fixed number of parent hops) is named by `check`, whatever the number.
Hand-written trees, then the generated ones of judgekit.gen.tree_suite (the deepest one DEEPEST levels deep)."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tensor_mismatch
from practice.judgekit.gen import DEEPEST, tree_suite
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from tree_spec.core.topology import depths, tree_mask

FUNCTIONS = ("tree_mask",)
NEEDS_MODEL = False

TREES = {
    "chain": [-1, 0, 1, 2, 3],
    "six-node tree": [-1, 0, 0, 1, 1, 2],
    "wide tree [2,2,1,1]": [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    "deep uneven tree": [-1, 0, 1, 1, 0, 4, 2, 6, 3, 5],
    **dict(tree_suite(seed=1)),
}
# README rule -> the cases that fail when it is broken (tests/test_judge_rules.py checks the names exist)
RULES = {
    "bool [n, n] (shape and dtype torch.bool)": list(TREES),
    "node i attends to itself (the diagonal)": list(TREES),
    "never to siblings or cousins": ["six-node tree", "wide tree [2,2,1,1]", "wide star of 12"],
    "never to descendants (row i = node i's ancestors)": ["chain", "deep chain of 9"],
    "every ancestor, not only the parent, however deep": ["deep chain of 9", "deep random tree of 20",
                                                          f"random tree of 70, {DEEPEST} levels"],
    "a one-node tree": ["single node"],
    "any size (no fixed buffer)": [f"random tree of 70, {DEEPEST} levels"],
    "parents is not modified (checked after every call)": list(TREES),
}
LIMITS = [Limit("random trees of up to 70 nodes and 22 levels", 70, lambda c: len(c.args["parents"])),
          Limit("random trees of up to 70 nodes and 22 levels", DEEPEST, lambda c: max(depths(c.args["parents"])))]


def cases(ctx: Context) -> list[Case]:
    return [Case(name, {"parents": parents}, f"parents={parents}") for name, parents in TREES.items()]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.tree_mask(list(case.args["parents"]))


def check(got: Any, expected: Any, case: Case) -> str | None:
    problem = tensor_mismatch(got, expected, "mask")
    if problem is None or not isinstance(got, torch.Tensor) or (got.shape, got.dtype) != (expected.shape, expected.dtype):
        return problem
    parents = case.args["parents"]
    i = next(i for i in range(len(parents)) if not torch.equal(got[i], expected[i]))
    should, sees = expected[i].nonzero().flatten().tolist(), got[i].nonzero().flatten().tolist()
    missing, depth = sorted(set(should) - set(sees)), depths(parents)
    if set(sees) < set(should) and i in sees and max(depth[j] for j in missing) < min(depth[j] for j in sees):
        return (f"{problem} Node {i}, {depth[i]} levels deep, sees only its {len(sees) - 1} nearest ancestors and "
                f"misses {missing}: a row marks EVERY ancestor up to the root, however deep (no fixed number of "
                f"parent hops). Rule: every ancestor, not only the parent, however deep.")
    return f"{problem} First wrong row: node {i} (should see {should}, sees {sees})."


def _no_diagonal(parents):
    return tree_mask(parents) & ~torch.eye(len(parents), dtype=torch.bool)


def _causal(parents):
    return torch.ones(len(parents), len(parents), dtype=torch.bool).tril()


def _parent_only(parents):
    out = torch.eye(len(parents), dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            out[i, p] = True
    return out


def _transposed(parents):
    return _no_diagonal(parents).T | torch.eye(len(parents), dtype=torch.bool)


MISTAKES = [
    Mistake("the diagonal is missing: mask[i, i] must be True, every node attends to itself.",
            {"tree_mask": _no_diagonal}),
    Mistake("this is a plain causal (lower-triangular) mask: node i must not see earlier nodes that are "
            "not its ancestors (siblings and cousins).", {"tree_mask": _causal}),
    Mistake("the mask is transposed: row i must mark node i's ancestors (mask[i, j] for j an ancestor), "
            "not its descendants.", {"tree_mask": _transposed}),
    Mistake("only the parent is marked: row i must mark EVERY ancestor of node i up to the root (start from "
            "a copy of the parent's row).", {"tree_mask": _parent_only}),
]
MISTAKES = with_rules(MISTAKES, RULES, [1, 2, 3, 4])  # the README rule each mistake breaks
