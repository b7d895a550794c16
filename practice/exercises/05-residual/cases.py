"""Residual distribution, atol 1e-6 / rtol 1e-5 (float32 rounding of values <= 1 is ~6e-8, far inside it);
mistakes: no renormalization, swapped, target, float32 instead of the inputs' dtype.

"nearly degenerate rows": target = draft + eps * (e_i - e_j) with eps = 1e-4 and 1e-6 (float32). The positive
part is eps on token i alone, so the exact residual is the one-hot e_i, exactly (a single positive entry divided
by itself; float32 rounding of draft[i] + eps cannot make it 0 or add another entry). Code that treats a small
but positive mass as degenerate (e.g. mass <= 1e-3) returns target_probs there instead, off by ~1 at token i: the
existing atol 1e-6 separates the two by a factor of ~10^6, so no new tolerance is needed."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tensor_mismatch
from practice.judgekit.devices import meta_mismatch, meta_run
from practice.judgekit.gen import strided
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

FUNCTIONS = ("residual",)
NEEDS_MODEL = False
ATOL, RTOL = 1e-6, 1e-5
META_INPUTS = "target_probs and draft_probs [2, 3, 6]"


def _dist(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) ** 3
    return (x / x.sum(-1, keepdim=True)).to(dtype)


NEAR_EPS = (1e-4, 1e-6)


def _near_degenerate():
    """[2, 8] float32 rows: target = draft + eps * (e_i - e_j), eps in NEAR_EPS -> (target, draft)."""
    draft = _dist((len(NEAR_EPS), 8), 13)
    target = draft.clone()
    for r, (eps, i, j) in enumerate(zip(NEAR_EPS, (5, 2), (1, 6))):
        target[r, i] += eps
        target[r, j] -= eps
    return target, draft


def cases(ctx: Context) -> list[Case]:
    near_t, near_d = _near_degenerate()
    batch_t, batch_d = _dist((4, 8), 2), _dist((4, 8), 3)
    batch_d[2] = batch_t[2]  # a degenerate row: target == draft
    cube_t, cube_d = _dist((2, 3, 6), 4), _dist((2, 3, 6), 5)
    cube_d[1, 0] = cube_t[1, 0]
    return [
        Case("one row", {"target_probs": _dist((8,), 0), "draft_probs": _dist((8,), 1)}, "V = 8"),
        Case("batch with a degenerate row", {"target_probs": batch_t, "draft_probs": batch_d},
             "[4, 8], row 2 has target == draft"),
        Case("disjoint supports", {"target_probs": torch.tensor([0.5, 0.5, 0.0, 0.0]),
                                   "draft_probs": torch.tensor([0.0, 0.0, 0.25, 0.75])}, "V = 4"),
        Case("3-D batch", {"target_probs": cube_t, "draft_probs": cube_d}, "[2, 3, 6], entry [1, 0] degenerate"),
        Case("float64", {"target_probs": _dist((3, 5), 6, torch.float64), "draft_probs": _dist((3, 5), 7, torch.float64)},
             "[3, 5] float64: the result must be float64 too"),
        Case("non-contiguous rows", {"target_probs": _dist((7, 4), 8).T.contiguous().T,
                                     "draft_probs": _dist((7, 4), 9).T.contiguous().T}, "[7, 4] with strides (1, 7)"),
        Case("one wide row", {"target_probs": _dist((5000,), 10), "draft_probs": _dist((5000,), 11)}, "V = 5000"),
        Case("every row degenerate", {"target_probs": _dist((2, 6), 12), "draft_probs": _dist((2, 6), 12)},
             "[2, 6], target == draft everywhere"),
        Case("nearly degenerate rows", {"target_probs": near_t, "draft_probs": near_d},
             "[2, 8], target = draft + eps on one token, - eps on another (eps = 1e-4, 1e-6): the residual is "
             "that one token"),
        Case("non-contiguous 3-D batch", {"target_probs": _dist((3, 2, 6), 14), "draft_probs": _dist((3, 2, 6), 15),
                                          "layout": "transposed"}, "[3, 2, 6] with dims 0 and 1 swapped in memory"),
        Case("sliced 3-D batch", {"target_probs": _dist((3, 4, 5), 16), "draft_probs": _dist((3, 4, 5), 17),
                                  "layout": "sliced"}, "[3, 4, 5], every other slot of a [6, 4, 5] tensor"),
        Case("inputs on the meta device", {"target_probs": cube_t, "draft_probs": cube_d, "layout": "meta"},
             f"{META_INPUTS} on the meta device: the result must stay there"),
    ]


RULES = {
    "max(0, target - draft), not the other way round": ["one row", "batch with a degenerate row", "3-D batch"],
    "renormalized to sum 1 over the last dim": ["one row", "batch with a degenerate row", "disjoint supports"],
    "target_probs on degenerate rows (target == draft)": ["batch with a degenerate row", "3-D batch",
                                                          "every row degenerate"],
    "only target == draft exactly is degenerate (a tiny positive part is still a residual)": ["nearly degenerate rows"],
    "any leading shape ([V], [B, V], [B, T, V])": ["one row", "batch with a degenerate row", "3-D batch"],
    "same dtype as the inputs": ["float64"],
    "any strides, any V": ["non-contiguous rows", "non-contiguous 3-D batch", "sliced 3-D batch", "one wide row"],
    "any device: tensors built on the inputs' device": ["inputs on the meta device"],
    "the inputs are not modified (checked after every call)": ["one row", "float64"],
}
LIMITS = [Limit("a row of V = 5000", 5000, lambda c: c.args["target_probs"].shape[-1]),
          Limit("[B, T, V]", 3, lambda c: c.args["target_probs"].dim()),
          *(Limit("non-contiguous rows and 3-D batches (transposed and sliced in memory)", 3,
                  lambda c, layout=layout: c.args["target_probs"].dim() if c.args.get("layout") == layout else 0)
            for layout in ("transposed", "sliced")),
          Limit("ε = 1e-4 and 1e-6", 1e-6, lambda c: min(NEAR_EPS) if c.name == "nearly degenerate rows" else 1,
                at_most=True)]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> the residual; for the meta case its {device, shape, dtype}; a str when other strides raise."""
    target, draft, layout = case.args["target_probs"].clone(), case.args["draft_probs"].clone(), case.args.get("layout")
    if layout == "meta":
        return meta_run(lambda: fns.residual(target.to("meta"), draft.to("meta")), "residual", META_INPUTS)
    if layout is None:
        return fns.residual(target, draft)
    try:
        return fns.residual(strided(target, layout), strided(draft, layout))
    except Exception as e:  # only the layout differs from cases that passed: name the rule
        why = " ".join(str(e).split())[:160].rstrip(".")
        return (f"residual failed on {case.note}: {type(e).__name__}: {why}. The rule: any strides; `.view` needs "
                f"contiguous memory, `.reshape` (or working on the last dim) does not.")


def check(got: Any, expected: Any, case: Case) -> str | None:
    if case.args.get("layout") == "meta":
        return meta_mismatch(got, expected, "residual", META_INPUTS)
    if isinstance(got, str):
        return got
    problem = tensor_mismatch(got, expected, "residual", ATOL, RTOL)
    if problem is None or not isinstance(got, torch.Tensor) or (got.shape, got.dtype) != (expected.shape, expected.dtype):
        return problem
    target, draft = case.args["target_probs"], case.args["draft_probs"]
    rows = got.reshape(-1, got.shape[-1]).detach().double()
    same = (target == draft).all(-1).reshape(-1)
    for r, (row, degenerate) in enumerate(zip(rows, same)):
        at = _row(r, got.shape)
        if degenerate and not torch.allclose(row, target.reshape(rows.shape)[r].double(), atol=ATOL):
            return f"{problem} {at} has target == draft (nothing to reject): return target_probs there."
        if not degenerate and abs(row.sum().item() - 1) > 1e-4:
            return f"{problem} {at} sums to {row.sum().item():.4f}, not 1."
        mass = float((target - draft).reshape(rows.shape)[r].double().clamp_min(0).sum())
        if not degenerate and mass < 1e-2 and torch.allclose(row, target.reshape(rows.shape)[r].double(), atol=ATOL):
            return (f"{problem} {at} returned target_probs, but target != draft there: its positive part has "
                    f"mass {mass:.1g}, small but not 0, so the residual is norm(max(0, target - draft)) (here one "
                    f"token). Only rows where target == draft exactly are degenerate: compare the mass with 0, not "
                    f"with a threshold.")
    return problem


def _row(r: int, shape: torch.Size) -> str:
    """Row r of the flattened leading dims, named by its index as the tensor indexes it ('Row [1, 0]' in [2, 3, V]),
    the form the worst-index report uses."""
    if len(shape) == 1:
        return "The row"
    return f"Row {[int(i) for i in torch.unravel_index(torch.tensor(r), tuple(shape[:-1]))]}"


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
    Mistake("the result must keep the inputs' dtype (float64 in, float64 out): do not convert with .float().",
            {"residual": lambda t, d: _normalized(_positive(t.float(), d.float()), t.float())}),
]
MISTAKES = with_rules(MISTAKES, RULES, [1, 0, 0, 5])  # the README rule each mistake breaks
