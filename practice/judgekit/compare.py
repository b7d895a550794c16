"""Comparisons used by the exercises' checks; each returns None on a match, else a one-paragraph message.

Numeric: type, then shape, then dtype, then max abs / rel error, the worst index and the tolerance.
Tokens and integers: exact, read by the one type policy of judgekit.values (which the capstone reads them by too).
Counts: a chi-square goodness-of-fit test (tree_spec.analysis.stats.chi_square), passing at p >= values.P_MIN.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from tree_spec.analysis.stats import chi_square

from .values import P_MIN, as_int, as_ints, int_problem, ints_problem, kind, law_holds


def describe(x: Any) -> str:
    """A short description of a value's type, for 'expected ..., got ...' messages."""
    from .wire import Opaque

    if isinstance(x, Opaque):
        return f"{x.type_name} {x.text}"[:120]
    return kind(x)


def tensor_mismatch(
    got: Any, expected: torch.Tensor, what: str, atol: float = 0.0, rtol: float = 0.0
) -> str | None:
    """Tensors: exact for bool/integer dtypes, else |got - expected| <= atol + rtol * |expected| everywhere."""
    want = f"a Tensor of shape {list(expected.shape)} and dtype {expected.dtype}"
    if not isinstance(got, torch.Tensor):
        return f"{what}: expected {want}, got {describe(got)}."
    if got.shape != expected.shape:
        return f"{what}: wrong shape {list(got.shape)}, expected {list(expected.shape)}."
    if got.dtype != expected.dtype:
        return f"{what}: wrong dtype {got.dtype}, expected {expected.dtype}."
    got, expected = got.detach().cpu(), expected.cpu()
    if not expected.is_floating_point():
        bad = (got != expected).nonzero()
        if len(bad) == 0:
            return None
        first = tuple(bad[0].tolist())
        return (f"{what}: {len(bad)} of {expected.numel()} entries differ; first at index {list(first)}: "
                f"got {got[first].item()}, expected {expected[first].item()}.")
    g, e = got.double(), expected.double()
    if not torch.isfinite(g).all():
        index = tuple((~torch.isfinite(g)).nonzero()[0].tolist())
        return f"{what}: non-finite value {g[index].item()} at index {list(index)}."
    err = (g - e).abs()
    allowed = atol + rtol * e.abs()
    if bool((err <= allowed).all()):
        return None
    worst = tuple(int(i) for i in torch.unravel_index((err - allowed).argmax(), err.shape))
    rel = err / e.abs().clamp_min(1e-12)
    n_bad = int((err > allowed).sum())
    return (f"{what}: {n_bad} of {e.numel()} entries outside the tolerance (atol={atol:g}, rtol={rtol:g}); "
            f"max abs error {err.max().item():.3g}, max rel error {rel.max().item():.3g}; worst at index "
            f"{list(worst)}: got {g[worst].item():.6g}, expected {e[worst].item():.6g}.")


def tokens_mismatch(got: Any, expected: Sequence[int], what: str) -> str | None:
    """A list of ints (`values.as_ints`: a list or tuple of ints, NumPy integers or 0-d integer tensors), compared
    exactly; reports the first differing index."""
    ints = as_ints(got)
    if ints is None:
        return ints_problem(got, what)
    if ints == list(expected):
        return None
    first = next((i for i, (a, b) in enumerate(zip(ints, expected)) if a != b), min(len(ints), len(expected)))
    return (f"{what}: got {ints}, expected {list(expected)}; first difference at index {first}"
            + (f" (length {len(ints)} vs {len(expected)})." if len(ints) != len(expected) else "."))


def int_mismatch(got: Any, expected: int, what: str) -> str | None:
    """An int (`values.as_int`: also a NumPy integer or a 0-d integer tensor), exactly."""
    value = as_int(got)
    if value is None:
        return int_problem(got, what)
    return None if value == expected else f"{what}: got {value}, expected {expected}."


def float_mismatch(got: Any, expected: float, what: str, rtol: float = 1e-9, atol: float = 1e-12) -> str | None:
    """A Python/NumPy/0-d tensor number within atol + rtol * |expected|."""
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.item()
    if not isinstance(got, (int, float)) or isinstance(got, bool):
        return f"{what}: expected a float, got {describe(got)}."
    if math.isclose(got, expected, rel_tol=rtol, abs_tol=atol):
        return None
    rel = abs(got - expected) / max(abs(expected), 1e-300)
    return (f"{what}: got {got:.6g}, expected {expected:.6g} (abs error {abs(got - expected):.3g}, rel error "
            f"{rel:.3g}; tolerance rtol={rtol:g}, atol={atol:g}).")


def counts_mismatch(counts: Any, expected: torch.Tensor, what: str) -> str | None:
    """Observed counts [n] vs an expected distribution or counts [n]: passes when `values.law_holds(p)`."""
    if not isinstance(counts, torch.Tensor) or counts.shape != expected.shape:
        return f"{what}: expected counts of shape {list(expected.shape)}, got {describe(counts)}."
    stat, p = chi_square(counts, expected)
    if law_holds(p):
        return None
    obs = counts.double() / counts.sum()
    exp = expected.double() / expected.sum()
    worst = int((obs - exp).abs().argmax())
    return (f"{what}: chi-square = {stat:.1f}, p = {p:.2g} < {P_MIN:g} over {int(counts.sum())} samples; "
            f"largest gap at outcome {worst}: observed frequency {obs[worst]:.3f}, expected {exp[worst]:.3f}.")
