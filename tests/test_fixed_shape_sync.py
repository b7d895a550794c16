"""No host read inside a fixed-shape step, checked on the CPU on every run.

A fixed-shape step is captured once as a CUDA graph and replayed; it must never read a device value on the host
(`item`, `int()`, `bool()`, `tolist`) or run an op whose output shape depends on the data (`nonzero`, boolean-mask
indexing, `unique`, ...): on a GPU each would stall the host until the device drains, and break graph capture.
`no_host_reads()` raises on every such op; it wraps only the steps (`_step`), not the loop's one intended host
read per step. The `cuda` tests in tests/test_fixed_shape.py check the same with CUDA's sync debugging.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from mini_llm import Transformer, generate
from tree_spec.core.contracts import SamplingParams
from tree_spec.fixed_shape.chain import FixedShapeChain
from tree_spec.fixed_shape.loop import FixedShapeLoop
from tree_spec.fixed_shape.tree import FixedShapeDynamicTree
from tests.spec_models import prompts, random_model
from tests.test_devices import make_drafter

aten = torch.ops.aten
NEW = 16
# ops that copy a device value to the host, or whose output shape depends on the data (they do, to size it)
HOST_READS = {
    aten._local_scalar_dense, aten.item, aten.is_nonzero, aten.equal, aten.nonzero, aten.nonzero_numpy,
    aten.argwhere, aten.masked_select, aten._unique, aten._unique2, aten.unique_dim, aten.unique_consecutive,
    aten.unique_dim_consecutive, aten.bincount,
}
HOST_READ_OVERLOADS = {aten.where.default}  # torch.where(cond): nonzero; the three-argument overloads are fine
HOST_COPIES = {torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__}  # read memory below the dispatcher


class HostRead(RuntimeError):
    """A fixed-shape step read a device value on the host or ran an op with a data-dependent output shape."""


def _reads_the_host(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> bool:
    if func.overloadpacket in HOST_READS or func in HOST_READ_OVERLOADS:
        return True
    if func.overloadpacket in (aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_):
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)  # a boolean mask
    if func is aten.repeat_interleave.Tensor:
        return kwargs.get("output_size") is None
    return False


class _NoHostReadOps(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _reads_the_host(func, args, kwargs):
            raise HostRead(f"{func} inside a fixed-shape step")
        return func(*args, **kwargs)


class _NoHostCopies(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_COPIES:
            raise HostRead(f"Tensor.{func.__name__} inside a fixed-shape step")
        return func(*args, **(kwargs or {}))


@contextmanager
def no_host_reads() -> Iterator[None]:
    """Inside the block, every host read and every data-dependent output shape raises `HostRead`."""
    with _NoHostCopies(), _NoHostReadOps():
        yield


def checked(loop: FixedShapeLoop) -> list[int]:
    """Run every step of `loop` under `no_host_reads` (set before its first request, which captures the step);
    -> a list that counts the checked steps."""
    step, calls = loop._step, []

    def strict(root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        with no_host_reads():
            return step(root)

    loop._step = strict
    return calls


@pytest.fixture(scope="module")
def target() -> Transformer:
    return random_model(seed=0)


LOOPS: dict[str, Callable[[Transformer], FixedShapeLoop]] = {
    "chain, small model, greedy": lambda t: FixedShapeChain(t, make_drafter("small model", t), 64, k=3),
    "chain, EAGLE draft_vocab, greedy": lambda t: FixedShapeChain(t, make_drafter("EAGLE draft_vocab", t), 64, k=3),
    "chain, small model, sampled": lambda t: FixedShapeChain(
        t, make_drafter("small model", t), 64, k=3,
        sampling=SamplingParams(1.0, top_k=20, top_p=0.9, generator=torch.Generator().manual_seed(0))),
    "chain, MTP, sampled": lambda t: FixedShapeChain(
        t, make_drafter("MTP", t), 64, k=3, sampling=SamplingParams(0.8, generator=torch.Generator().manual_seed(0))),
    "dynamic tree, EAGLE, greedy": lambda t: FixedShapeDynamicTree(t, make_drafter("EAGLE", t), 64, depth=3, width=3,
                                                                   total_tokens=8),
    "dynamic tree, EAGLE-3, greedy": lambda t: FixedShapeDynamicTree(t, make_drafter("EAGLE-3", t), 64, depth=2,
                                                                     width=2, total_tokens=4),
}


@pytest.mark.parametrize("form", LOOPS)
def test_fixed_shape_steps_never_read_the_device(target: Transformer, form: str) -> None:
    """Every step of every form runs under `no_host_reads`, over two requests (the second replays the captured
    step), and greedy still gives `generate`'s tokens."""
    loop = LOOPS[form](target)
    steps = checked(loop)
    verify_passes = 0
    for prompt in prompts(target.cfg.vocab_size, 2, length=9, seed=4):
        out = loop.generate(prompt, NEW)
        assert len(out.tokens) == NEW
        if loop.sampling.greedy:
            assert out.tokens == generate(target, torch.tensor([prompt], device="cpu"), NEW)[0].tolist(), form
        verify_passes += len(out.accepted_per_call)
    assert len(steps) == verify_passes >= 2  # every step was checked


LEAKS: dict[str, Callable[[torch.Tensor], object]] = {
    "item": lambda root: root.item(),
    "int": lambda root: int(root),
    "bool": lambda root: bool(root > 0),
    "tolist": lambda root: root[None].tolist(),
    "index by a 0-dim tensor": lambda root: torch.arange(4)[root.clamp(0, 3)],
    "nonzero": lambda root: torch.nonzero(torch.arange(4) > root),
    "boolean mask": lambda root: torch.arange(4)[torch.arange(4) > root],
    "unique": lambda root: torch.unique(root[None]),
}


@pytest.mark.parametrize("leak", LEAKS)
def test_a_host_read_injected_into_a_step_is_caught(target: Transformer, leak: str) -> None:
    """The check is not vacuous: the chain's step with one host read added fails under it."""

    class Leaky(FixedShapeChain):
        def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            LEAKS[leak](root)
            return super()._step(root)

    loop = Leaky(target, make_drafter("small model", target), 64, k=3)
    checked(loop)
    with pytest.raises(HostRead):
        loop.generate(prompts(target.cfg.vocab_size, 1, length=9, seed=4)[0], NEW)
    Leaky(target, make_drafter("small model", target), 64, k=3).generate([1, 2, 3], 4)  # fine unchecked
