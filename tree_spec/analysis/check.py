"""One comparison helper for the notebooks: one aligned ``check:`` line per comparison, its verdict in words.

Modelled on makemore's ``cmp``. The line names what is compared and says ``identical`` (exactly equal),
``close (max |Δ| …, bar …)`` (floats within the bar) or ``MISMATCH …`` (and why). Token sequences and
integer / boolean tensors (tokens, masks) are compared exactly; on a mismatch the first differing index is
printed (nanochat's habit).

    >>> compare("tokens", [5, 7, 9], [5, 7, 9])
    check: tokens                               identical (3 items)
    True
    >>> compare("tokens", [5, 7, 9], [5, 8, 9])
    check: tokens                               MISMATCH at index 1: ours 7, theirs 8 (3 vs 3 items)
    False
    >>> compare("probs", torch.tensor([0.25, 0.75]), torch.tensor([0.25, 0.75 + 1e-7]), bar=1e-6)
    check: probs                                close (max |Δ| 1.2e-07, bar 1.0e-06)
    True
    >>> compare("probs", torch.tensor([0.25, 0.75]), torch.tensor([0.25, 0.75]), bar=1e-6)
    check: probs                                identical (2 items)
    True
    >>> compare("probs", torch.tensor([0.25, 0.75]), torch.tensor([0.25, 0.76]), bar=1e-6)
    check: probs                                MISMATCH (max |Δ| 1.0e-02, over the bar 1.0e-06)
    False
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

NAME_WIDTH = 36


def _is_exact_kind(value: object) -> bool:
    """True for values compared exactly: int/bool tensors, and sequences whose items are all ints or bools."""
    if isinstance(value, torch.Tensor):
        return not (value.is_floating_point() or value.is_complex())
    if isinstance(value, (bool, int)):
        return True
    if isinstance(value, Sequence) and not isinstance(value, str):
        return all(isinstance(item, (bool, int)) for item in value)
    return False


def _as_list(value: object) -> list:
    """Flat Python list of an int/bool tensor, a sequence, or a single int."""
    if isinstance(value, torch.Tensor):
        return value.reshape(-1).tolist()
    if isinstance(value, (bool, int)):
        return [value]
    return list(value)


def _compare_exact(ours: object, theirs: object) -> tuple[bool, str]:
    """Exact comparison; on mismatch the text names the first differing index (or the shape difference)."""
    if isinstance(ours, torch.Tensor) and isinstance(theirs, torch.Tensor) and ours.shape != theirs.shape:
        return False, f"MISMATCH: shape {tuple(ours.shape)} vs {tuple(theirs.shape)}"
    ours_list, theirs_list = _as_list(ours), _as_list(theirs)
    for index, (a, b) in enumerate(zip(ours_list, theirs_list)):
        if a != b:
            return False, (f"MISMATCH at index {index}: ours {a}, theirs {b} "
                           f"({len(ours_list)} vs {len(theirs_list)} items)")
    if len(ours_list) != len(theirs_list):
        return False, (f"MISMATCH at index {min(len(ours_list), len(theirs_list))}: lengths "
                       f"{len(ours_list)} vs {len(theirs_list)} (the shorter is a prefix of the longer)")
    return True, _identical(len(ours_list))


def _identical(items: int) -> str:
    """'identical' with the item count (none for a single value)."""
    return "identical" if items == 1 else f"identical ({items} items)"


def compare(name: str, ours: object, theirs: object, bar: float | None = None) -> bool:
    """Print one aligned ``check:`` line comparing ``ours`` with ``theirs``; return whether they agree.

    Args:
        name: what is compared (the left column).
        ours, theirs: token lists / int or bool tensors (compared exactly), or floats / float tensors / float
            sequences of the same shape (compared by max |Δ|).
        bar: largest max |Δ| accepted for floats; ``None`` means exact equality is required. Ignored for
            exact kinds (tokens and masks are never compared with a tolerance).
    Returns:
        True when exactly equal (exact kinds) or max |Δ| <= bar (floats). The printed verdict: ``identical``,
        ``close (max |Δ| …, bar …)`` (floats, not equal, within the bar) or ``MISMATCH …``.
    """
    label = f"check: {name:<{NAME_WIDTH}}"
    if _is_exact_kind(ours) and _is_exact_kind(theirs):
        passed, text = _compare_exact(ours, theirs)
        print(f"{label} {text}")
        return passed
    ours_t = torch.as_tensor(ours, dtype=torch.float64, device="cpu").detach()
    theirs_t = torch.as_tensor(theirs, dtype=torch.float64, device="cpu").detach()
    if ours_t.shape != theirs_t.shape:
        print(f"{label} MISMATCH: shape {tuple(ours_t.shape)} vs {tuple(theirs_t.shape)}")
        return False
    if torch.equal(ours_t, theirs_t):
        print(f"{label} {_identical(ours_t.numel())}")
        return True
    max_diff = (ours_t - theirs_t).abs().max().item() if ours_t.numel() else 0.0
    close = bar is not None and max_diff <= bar  # False for NaN
    if close:
        print(f"{label} close (max |Δ| {max_diff:.1e}, bar {bar:.1e})")
    elif bar is None:
        print(f"{label} MISMATCH (max |Δ| {max_diff:.1e}; no bar given, so exact equality was required)")
    else:
        print(f"{label} MISMATCH (max |Δ| {max_diff:.1e}, over the bar {bar:.1e})")
    return close
