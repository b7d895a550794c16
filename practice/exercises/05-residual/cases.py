"""Residual distribution, float32, atol 1e-6 / rtol 1e-5; mistakes: no renormalization, swapped, target."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tensor_mismatch
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("residual",)
NEEDS_MODEL = False
ATOL, RTOL = 1e-6, 1e-5


def _dist(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g) ** 3
    return x / x.sum(-1, keepdim=True)


def cases(ctx: Context) -> list[Case]:
    batch_t, batch_d = _dist((4, 8), 2), _dist((4, 8), 3)
    batch_d[2] = batch_t[2]  # a degenerate row: target == draft
    return [
        Case("one row", {"target_probs": _dist((8,), 0), "draft_probs": _dist((8,), 1)}, "V = 8"),
        Case("batch with a degenerate row", {"target_probs": batch_t, "draft_probs": batch_d},
             "[4, 8], row 2 has target == draft"),
        Case("disjoint supports", {"target_probs": torch.tensor([0.5, 0.5, 0.0, 0.0]),
                                   "draft_probs": torch.tensor([0.0, 0.0, 0.25, 0.75])}, "V = 4"),
    ]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.residual(case.args["target_probs"].clone(), case.args["draft_probs"].clone())


def check(got: Any, expected: Any, case: Case) -> str | None:
    problem = tensor_mismatch(got, expected, "residual", ATOL, RTOL)
    if problem is None or not isinstance(got, torch.Tensor) or (got.shape, got.dtype) != (expected.shape, expected.dtype):
        return problem
    target, draft = case.args["target_probs"], case.args["draft_probs"]
    rows = got.reshape(-1, got.shape[-1]).detach().double()
    same = (target == draft).all(-1).reshape(-1)
    for r, (row, degenerate) in enumerate(zip(rows, same)):
        if degenerate and not torch.allclose(row, target.reshape(rows.shape)[r].double(), atol=ATOL):
            return f"{problem} Row {r} has target == draft (nothing to reject): return target_probs there."
        if not degenerate and abs(row.sum().item() - 1) > 1e-4:
            return f"{problem} Row {r} sums to {row.sum().item():.4f}, not 1."
    return problem


def _positive(t, d):
    return (t - d).clamp_min(0)


def _normalized(x, t):
    mass = x.sum(-1, keepdim=True)
    return torch.where(mass > 0, x / mass.clamp_min(1e-30), t)


MISTAKES = [
    Mistake("the positive part is not renormalized: divide max(0, target - draft) by its sum so that it "
            "sums to 1.", {"residual": lambda t, d: torch.where(_positive(t, d).sum(-1, keepdim=True) > 0, _positive(t, d), t)}),
    Mistake("target and draft are swapped: the residual is max(0, target - draft), the mass the draft "
            "under-covers.", {"residual": lambda t, d: _normalized(_positive(d, t), t)}),
    Mistake("that is the target distribution itself; after a rejection the token must come from the "
            "positive part of target - draft.", {"residual": lambda t, d: t.clone()}),
]
