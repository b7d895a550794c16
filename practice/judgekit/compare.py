"""Comparisons used by the exercises' checks; each returns None on a match, else a one-paragraph message.

Numeric: type, then shape, then dtype, then max abs / rel error, the worst index and the tolerance.
Tokens and integers: exact. Counts: a chi-square goodness-of-fit test (tree_spec.analysis.stats.chi_square).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from tree_spec.analysis.stats import chi_square


def describe(x: Any) -> str:
    """A short description of a value's type, for 'expected ..., got ...' messages."""
    from .wire import Opaque

    if isinstance(x, torch.Tensor):
        return f"a Tensor of shape {list(x.shape)} and dtype {x.dtype}"
    if isinstance(x, Opaque):
        return f"{x.type_name} {x.text}"[:120]
    if isinstance(x, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in x})
        return f"a {type(x).__name__} of {len(x)} items ({', '.join(kinds) or 'empty'})"
    return f"{type(x).__name__} {x!r}"[:120]


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
    """A list of ints, compared exactly; reports the first differing index."""
    if isinstance(got, torch.Tensor):
        return f"{what}: expected a list of {len(expected)} ints, got {describe(got)} (use .tolist())."
    if not isinstance(got, (list, tuple)) or not all(isinstance(t, int) and not isinstance(t, bool) for t in got):
        return f"{what}: expected a list of ints, got {describe(got)}."
    got = list(got)
    if got == list(expected):
        return None
    first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    return (f"{what}: got {got}, expected {list(expected)}; first difference at index {first}"
            + (f" (length {len(got)} vs {len(expected)})." if len(got) != len(expected) else "."))


def int_mismatch(got: Any, expected: int, what: str) -> str | None:
    """An int (or a one-element integer tensor, read with .item(), as `float_mismatch` reads a float), exactly."""
    if isinstance(got, torch.Tensor) and got.numel() == 1 and not got.is_floating_point() and got.dtype != torch.bool:
        got = got.item()
    if not isinstance(got, int) or isinstance(got, bool):
        return f"{what}: expected an int, got {describe(got)}."
    return None if got == expected else f"{what}: got {got}, expected {expected}."


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


def counts_mismatch(counts: Any, expected: torch.Tensor, what: str, min_p: float = 1e-3) -> str | None:
    """Observed counts [n] vs an expected distribution or counts [n]: chi-square p-value >= min_p passes."""
    if not isinstance(counts, torch.Tensor) or counts.shape != expected.shape:
        return f"{what}: expected counts of shape {list(expected.shape)}, got {describe(counts)}."
    stat, p = chi_square(counts, expected)
    if p >= min_p:
        return None
    obs = counts.double() / counts.sum()
    exp = expected.double() / expected.sum()
    worst = int((obs - exp).abs().argmax())
    return (f"{what}: chi-square = {stat:.1f}, p = {p:.2g} < {min_p:g} over {int(counts.sum())} samples; "
            f"largest gap at outcome {worst}: observed frequency {obs[worst]:.3f}, expected {exp[worst]:.3f}.")
