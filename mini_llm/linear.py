"""The model's linear layers: one BLAS call for a row, a prepacked oneDNN matmul for several rows on the CPU.

A decode step multiplies one row by each weight, and the BLAS path (`F.linear` on the layout that `from_pretrained`
stores, `gemv_layout`) is the fastest there. A verify pass multiplies a few rows (3 to a few dozen tokens),
and there the BLAS path re-packs the weight into its blocked layout on every call. oneDNN can keep a copy of the
weight in its own blocked layout, packed once (as PyTorch's CPU compiler and IPEX do for linear layers): on the
AMD EPYC this course was measured on it multiplies 3-25 rows 20-45 % faster per matrix, one row about 20 % slower,
and a 5-token forward of the embedded target took 19 % less time. So several rows take the packed copy and one
row keeps the BLAS path. The copy costs the weight's memory a second time, made on first use; it is rebuilt
when the weight changes (an in-place update, a move), and never used under autograd, off the CPU, or for a weight
made under `torch.inference_mode` (whose in-place updates leave no trace to rebuild it by).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

MIN_ROWS = 3  # fewer rows: the BLAS path is as fast (2 rows) or faster (1 row)
PACKABLE = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class PackedCopy:
    """oneDNN's prepacked copy of one weight, rebuilt when the weight's storage or version changes.

    Deep copies (e.g. `quantized_copy`) start without a copy of their own: they pack their own weights."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._packed: torch.Tensor | None = None

    def of(self, weight: torch.Tensor) -> torch.Tensor:
        key = (weight.data_ptr(), weight._version, tuple(weight.shape))
        if key != self._key:
            self._packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 16)
            self._key = key
        return self._packed

    def __deepcopy__(self, memo: dict) -> PackedCopy:
        return PackedCopy()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, packed: PackedCopy) -> torch.Tensor:
    """x [..., in] @ weight [out, in]^T (+ bias) -> [..., out]: `F.linear`, or for >= MIN_ROWS rows of fp32 on the
    CPU outside autograd, the same product with `packed`'s copy of the weight (equal up to summation order)."""
    if (PACKABLE and x.numel() >= MIN_ROWS * x.shape[-1] and x.device.type == "cpu" and x.dtype == torch.float32
            and weight.dtype == torch.float32 and not weight.is_inference()  # an inference tensor has no version
            and not (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad))):
        return torch.ops.mkldnn._linear_pointwise(x, packed.of(weight), bias, "none", [], "")
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, same state dict) whose forward is `linear`: several rows take a packed copy."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, **kwargs) -> None:
        super().__init__(in_features, out_features, bias, **kwargs)
        self.packed = PackedCopy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.packed)


def gemv_layout(weight: torch.Tensor) -> torch.Tensor:
    """The same [out, in] matrix stored with its longer axis contiguous; other tensors unchanged.

    `F.linear(x, W)` computes x @ W^T. For one or two rows (a decode step; `mini_llm.linear` gives three or more a
    packed copy) the CPU BLAS runs a matrix-vector product, fastest when it streams long contiguous runs of W:
    W^T contiguous (column-major) when W has more outputs than inputs (q/k/v, gate/up, the LM head), the
    checkpoint's row-major W when it has more inputs than outputs (the MLP's down projection) or as many. On the
    AMD EPYC this course was last measured on, the other layout took 1.3 to 2 times as long for the rectangular
    shapes (about as long for a square one), and the down projection alone row-major instead of column-major made a
    decode step 4-9 % faster. Values, shapes and names are those of the checkpoint; `hf_state_dict` writes them back
    row-major.
    """
    if weight.ndim == 2 and weight.shape[0] > weight.shape[1]:
        return weight.t().contiguous().t()
    return weight.contiguous()
