"""Command-line argument types that check their range, so a bad flag is a one-line usage error, not a traceback."""
from __future__ import annotations

import argparse
from collections.abc import Callable


def ranged(kind: Callable[[str], float], ok: Callable[[float], bool], rule: str) -> Callable[[str], float]:
    """An argparse `type`: `kind(text)` that must satisfy `ok`, else an error saying `rule` (e.g. ">= 1")."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {rule}")
        return value

    return parse


POSITIVE_INT = ranged(int, lambda n: n >= 1, ">= 1")


def positive_ints(text: str) -> list[int]:
    """An argparse `type`: a comma-separated list of integers >= 1, e.g. "1,4,16"."""
    return [POSITIVE_INT(part.strip()) for part in text.split(",")]
