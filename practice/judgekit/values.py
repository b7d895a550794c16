"""One policy for the types and thresholds the READMEs name, shared by the exercises' checks and the capstone.

Types: where a README names `int`, a Python int, a NumPy integer or a 0-d integer tensor is read as the int it
equals (a bool, a float or a wider tensor is refused, and the message names its type); where it names `list[int]`,
a list or a tuple of such integers is read as the list it equals. The exercises (judgekit.compare, the
statistical exercises' own checks) and the capstone (capstone_loop, capstone_drafters) read results through
`as_int` / `as_ints` only, so a result gets one verdict from both.

Statistics: a chi-square test passes when p >= P_MIN, in the exercises (compare.counts_mismatch) and in the
capstone's sampled check (capstone_sampled) alike.
"""
from __future__ import annotations

import numbers
from typing import Any

import torch

P_MIN = 1e-3  # a chi-square test passes when p >= P_MIN
TYPE_POLICY = ("an int may be a Python int, a NumPy integer or a 0-d integer tensor, and a list of ints may be a "
               "list or a tuple")


def law_holds(p: float) -> bool:
    """The one pass rule of every chi-square test the judge runs."""
    return p >= P_MIN


def as_int(value: Any) -> int | None:
    """The int `value` equals (Python int, NumPy integer, 0-d integer tensor), or None (bool, float, anything else)."""
    if type(value) is int:  # the common case, without the ABC check below
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if (isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point()
            and not value.is_complex() and value.dtype != torch.bool):
        return int(value.item())
    return None


def as_ints(value: Any) -> list[int] | None:
    """The list of ints `value` equals (a list or tuple of integers as `as_int` reads them), or None."""
    if not isinstance(value, (list, tuple)):
        return None
    if all(type(v) is int for v in value):
        return list(value)
    out = [as_int(v) for v in value]
    return None if any(v is None for v in out) else out


def kind(value: Any) -> str:
    """A value's type as a message names it: 'a Tensor of shape [3]', 'a list of 2 items (float, int)', 'float 2.0'."""
    if isinstance(value, torch.Tensor):
        return f"a Tensor of shape {list(value.shape)} and dtype {value.dtype}"
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in value})
        return f"a {type(value).__name__} of {len(value)} items ({', '.join(kinds) or 'empty'})"
    return f"{type(value).__name__} {value!r}"[:120]


def ints_problem(value: Any, what: str) -> str:
    """Why `value` is not a list of ints, naming its type and the policy."""
    hint = " (use .tolist())" if isinstance(value, torch.Tensor) else ""
    return f"{what}: expected a list of ints, got {kind(value)}{hint}; {TYPE_POLICY}."


def int_problem(value: Any, what: str) -> str:
    """Why `value` is not an int, naming its type and the policy."""
    return f"{what}: expected an int, got {kind(value)}; {TYPE_POLICY}."
