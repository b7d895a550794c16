"""Tree mask: exact comparison; mistakes modelled: no diagonal, causal mask, transposed mask."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tensor_mismatch
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("tree_mask",)
NEEDS_MODEL = False

TREES = {
    "chain": [-1, 0, 1, 2, 3],
    "chapter tree": [-1, 0, 0, 1, 1, 2],
    "wide tree [2,2,1,1]": [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    "deep uneven tree": [-1, 0, 1, 1, 0, 4, 2, 6, 3, 5],
}


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
    return f"{problem} First wrong row: node {i} (should see {should}, sees {sees})."


def _no_diagonal(parents):
    mask = torch.zeros(len(parents), len(parents), dtype=torch.bool)
    for i, p in enumerate(parents):
        while p >= 0:
            mask[i, p] = True
            p = parents[p]
    return mask


def _causal(parents):
    return torch.ones(len(parents), len(parents), dtype=torch.bool).tril()


def _transposed(parents):
    return _no_diagonal(parents).T | torch.eye(len(parents), dtype=torch.bool)


MISTAKES = [
    Mistake("the diagonal is missing: mask[i, i] must be True, every node attends to itself.",
            {"tree_mask": _no_diagonal}),
    Mistake("this is a plain causal (lower-triangular) mask: node i must not see earlier nodes that are "
            "not its ancestors (siblings and cousins).", {"tree_mask": _causal}),
    Mistake("the mask is transposed: row i must mark node i's ancestors (mask[i, j] for j an ancestor), "
            "not its descendants.", {"tree_mask": _transposed}),
]
