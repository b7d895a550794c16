"""mini_llm.linear: several rows on the CPU take a oneDNN-packed copy of the weight, one row the BLAS path; both
give x @ W^T, and the copy follows the weight."""
import copy

import pytest
import torch
import torch.nn.functional as F

from mini_llm.linear import MIN_ROWS, PACKABLE, Linear, PackedCopy, linear

pytestmark = pytest.mark.skipif(not PACKABLE, reason="this torch build has no oneDNN linear")


def used_packed(layer: Linear, x: torch.Tensor) -> bool:
    """Whether `layer(x)` went through its packed copy (the copy is made on first use)."""
    layer.packed = PackedCopy()
    layer(x)
    return layer.packed._packed is not None


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 25])
def test_every_row_count_gives_x_times_w_transposed(rows: int) -> None:
    torch.manual_seed(0)
    layer = Linear(64, 96)
    x = torch.randn(1, rows, 64)
    with torch.inference_mode():
        out = layer(x)
    exact = x.double() @ layer.weight.double().T + layer.bias.double()
    torch.testing.assert_close(out.double(), exact, rtol=0, atol=1e-5)  # fp32 sums of 64 products of N(0, 1) terms
    with torch.inference_mode():
        assert used_packed(layer, x) == (rows >= MIN_ROWS)


def test_the_copy_follows_in_place_updates_and_deep_copies_pack_their_own() -> None:
    torch.manual_seed(0)
    layer = Linear(32, 48, bias=False)
    x = torch.randn(5, 32)
    with torch.inference_mode():
        before = layer(x)
    with torch.no_grad():
        layer.weight.mul_(2)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), 2 * before, rtol=1e-5, atol=1e-5)
    twin = copy.deepcopy(layer)
    assert twin.packed._packed is None
    with torch.no_grad():
        twin.weight.zero_()
    with torch.inference_mode():
        assert twin(x).abs().max() == 0 and layer(x).abs().max() > 0


def test_a_weight_made_in_inference_mode_takes_the_blas_path() -> None:
    with torch.inference_mode():
        layer = Linear(32, 48)
        x = torch.randn(5, 32)
        assert not used_packed(layer, x)
        layer.weight.zero_()  # untracked in-place update: a packed copy could not notice it
        assert layer(x).sub(layer.bias).abs().max() == 0


def test_autograd_takes_the_blas_path() -> None:
    torch.manual_seed(0)
    layer = Linear(16, 8)
    x = torch.randn(6, 16, requires_grad=True)
    layer(x).sum().backward()
    assert layer.packed._packed is None and x.grad is not None and layer.weight.grad is not None
    frozen = torch.randn(8, 16)
    out = linear(x, frozen, None, PackedCopy())  # a frozen weight, an input that needs its gradient
    out.sum().backward()
    torch.testing.assert_close(out, F.linear(x, frozen))
