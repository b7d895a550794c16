"""Fake quantization: round weights to k-bit integers and back, to build a cheap 'quantized self' draft."""
from __future__ import annotations

import copy

import torch
from torch import nn

from .model import FusedLinear, Transformer


def fake_quant_int(w: torch.Tensor, bits: int = 4, granularity: str = "group", group: int = 128) -> torch.Tensor:
    """Symmetric INT-`bits` round trip of w [out, in]: q = clamp(round(w / s)), return q * s.

    granularity: "tensor" (one scale), "channel" (one per output row) or "group" (one per `group`
    consecutive inputs of a row; `in` must be divisible by `group`). Scale s = max|w| / (2^(bits-1) - 1).
    """
    if not 2 <= bits <= 16:
        raise ValueError(f"bits must be in [2, 16], got {bits}")
    qmax = 2 ** (bits - 1) - 1
    w32 = w.float()
    if granularity == "tensor":
        view = w32.reshape(1, -1)
    elif granularity == "channel":
        view = w32.reshape(w32.shape[0], -1)
    elif granularity == "group":
        if w32.shape[-1] % group:
            raise ValueError(f"last dim {w32.shape[-1]} is not divisible by group={group}")
        view = w32.reshape(-1, group)
    else:
        raise ValueError(f"granularity must be 'tensor', 'channel' or 'group', got {granularity!r}")
    scale = view.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / qmax
    q = torch.clamp(torch.round(view / scale), -qmax - 1, qmax)
    return (q * scale).reshape(w.shape).to(w.dtype)


@torch.no_grad()
def quantized_copy(model: Transformer, bits: int = 4, granularity: str = "group", group: int = 128) -> Transformer:
    """A deep copy of `model` whose decoder-layer projections are INT-`bits` fake-quantized.

    Embeddings, the LM head and all norms keep full precision (the usual weight-only recipe).
    For group granularity, a projection whose input size is not a multiple of `group` uses the
    largest divisor of it not above `group`. A fused projection (q/k/v, gate/up) is quantized part by part,
    as the checkpoint's separate matrices (the same values for "group" and "channel", whose scales are per
    row; "tensor" takes one scale per part).
    """
    quantized = copy.deepcopy(model)
    for layer in quantized.layers:
        for module in layer.modules():
            if isinstance(module, nn.Linear):
                g = group
                while module.in_features % g:
                    g -= 1
                parts = module.split(module.weight).values() if isinstance(module, FusedLinear) else [module.weight]
                for weight in parts:  # views: writing one writes the module's weight
                    weight.copy_(fake_quant_int(weight, bits, granularity, g))
    return quantized
