"""Reproducibility of sampling exercises: every random number must come from the `generator` argument.

`draw_check(run, seed)` runs `run(generator)` three times: twice with a generator seeded `seed`, torch's global
RNG, Python's `random` and NumPy's global RNG reseeded differently before each; once with another seed.
The draws must be equal in the first two runs (nothing comes from a global RNG) and differ in the third
(they do come from `generator`). references.py hashes this file with each cases.py.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

HOW = ("draw every random number from `generator` (e.g. `torch.rand((), generator=generator)`, "
       "`torch.multinomial(probs, 1, generator=generator)`), never from torch's global RNG, Python's `random` "
       "or NumPy")


def _reseed_globals(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def draw_check(run: Callable[[torch.Generator], Any], seed: int) -> dict[str, bool] | str:
    """{"same seed, global RNGs reseeded: same draws": bool, "another seed: other draws": bool}, or run's str."""
    outputs = []
    for generator_seed, global_seed in ((seed, 1), (seed, 2), (seed + 1, 1)):
        _reseed_globals(global_seed)
        out = run(torch.Generator().manual_seed(generator_seed))
        if isinstance(out, str):
            return out
        outputs.append(out)
    return {"same seed, global RNGs reseeded: same draws": outputs[0] == outputs[1],
            "another seed: other draws": outputs[0] != outputs[2]}


def draw_mismatch(got: Any, expected: dict[str, bool], fn: str) -> str | None:
    """None when both properties hold, else what is wrong."""
    if isinstance(got, str):
        return got
    if got == expected:
        return None
    if not got.get("same seed, global RNGs reseeded: same draws", False):
        return (f"{fn} drew different tokens in two runs with the same `generator` seed (torch's global RNG, "
                f"Python's `random` and NumPy reseeded differently between them): {HOW}.")
    return (f"{fn} drew the same tokens whatever the `generator`'s seed, so its random numbers do not come from "
            f"`generator`: {HOW}.")
