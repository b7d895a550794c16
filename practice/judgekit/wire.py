"""Raw outputs between the worker and the judge, without pickle: JSON for structure, safetensors for tensors.

encode(value, tensors) -> a JSON-able tree whose tensors are {"tensor": key} with the tensor in `tensors`;
decode(tree, tensors) reverses it. Tuples and dicts are tagged; numbers of other types (NumPy's int64 and float64,
subclasses of int and float) travel as the plain int or float they equal; anything else travels as its type name and
repr (an `Opaque`), which the checks report as a wrong type.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Opaque:
    """A value of a type the wire does not carry: its type name and a short repr."""

    type_name: str
    text: str


def encode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = value.detach().to("cpu", copy=True).contiguous()
        return {"tensor": key}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):  # also NumPy's integers (bool was taken above)
        return int(value)
    if isinstance(value, numbers.Real):  # also NumPy's floats
        return float(value)
    if isinstance(value, list):
        return [encode(v, tensors) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode(v, tensors) for k, v in value.items()}}
    return {"opaque": type(value).__name__, "text": repr(value)[:200]}


def decode(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, list):
        return [decode(v, tensors) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "tensor" in tree:
        return tensors[tree["tensor"]]
    if "tuple" in tree:
        return tuple(decode(v, tensors) for v in tree["tuple"])
    if "dict" in tree:
        return {k: decode(v, tensors) for k, v in tree["dict"].items()}
    return Opaque(str(tree.get("opaque")), str(tree.get("text")))
