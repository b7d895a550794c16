"""The device rule: a function that takes tensors or a model builds its tensors on their device.

On a CPU every tensor is on the CPU, so `torch.arange(n)` without `device=` is invisible there and fails on a GPU.
`meta_run` runs the learner's function once on inputs on the `meta` device (shapes and dtypes, no data: every
op runs, none reads a value), where a tensor built on the CPU meets the inputs and raises, or comes back off
`meta`. references.py hashes this file with each cases.py.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .compare import describe

META = "the `meta` device (shapes and dtypes, no data: it stands in for a GPU)"
HOW = ("build every tensor on the inputs' device (`device=x.device`, `torch.zeros_like(x)`, `x.new_zeros(...)`) "
       "and keep the work on tensors (no `.item()` or `.tolist()` of a value)")


def meta_run(run: Callable[[], Any], fn: str, inputs: str) -> dict[str, Any] | str:
    """`run()` calls `fn` on `inputs` placed on meta -> the output's {device, shape, dtype}, or what went wrong."""
    try:
        out = run()
    except Exception as e:  # the learner's code on meta: a CPU-built tensor meets a meta one, or a value is read
        text = " ".join(str(e).split())[:200].rstrip(".")
        return f"{fn} failed with {inputs} on {META}: {type(e).__name__}: {text}. The rule: {HOW}."
    if not isinstance(out, torch.Tensor):
        return f"{fn} must return a Tensor, got {describe(out)}."
    return {"device": out.device.type, "shape": list(out.shape), "dtype": str(out.dtype)}


def meta_mismatch(got: Any, expected: dict[str, Any], fn: str, inputs: str) -> str | None:
    """None when the output stayed on meta with the expected shape and dtype, else what is wrong."""
    if isinstance(got, str):
        return got
    if got["device"] != expected["device"]:
        return (f"{fn} returned a tensor on {got['device']} with {inputs} on {META}: a tensor it built left the "
                f"inputs' device. The rule: {HOW}.")
    if got != expected:
        return (f"{fn} on {META}: expected shape {expected['shape']} and {expected['dtype']}, got {got['shape']} and "
                f"{got['dtype']}.")
    return None
