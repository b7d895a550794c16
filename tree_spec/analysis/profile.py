"""Per-op profiles of the target's forward: which aten ops a forward runs and what each costs.

What `compare_profiles` shows on the embedded target (tiny-qwen3, CPU, fp32, context 128): some work exists only
when T > 1: the [T, S] attention mask is built (`ones` + `tril`), turned into its additive form and `repeat`ed for
the query groups, and scaled_dot_product_attention runs with it in each layer. That part is small (a few tenths of a
ms). How much the matrix products (`linear`) grow from 1 to 2 rows depends on the machine's BLAS: about the same on
an Intel machine (2026-11-30), +25 to +65 % from run to run on an AMD EPYC (2026-12-01), where it is the largest
change. Run `compare_profiles(target)` to print the numbers on your machine.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mini_llm import Transformer

from .clocks import one_thread
from .curve import random_ids


class _OpTimer(TorchDispatchMode):
    """Accumulates the thread CPU ms and the call count of every aten op run inside it, keyed by the op's name,
    or with `by_shape` by (name, the shapes of its tensor arguments)."""

    def __init__(self, by_shape: bool = False) -> None:
        super().__init__()
        self.by_shape = by_shape
        self.ms: dict = {}
        self.calls: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        start = time.thread_time()
        out = func(*args, **(kwargs or {}))
        key = func.overloadpacket.__name__
        if self.by_shape:   # every tensor argument, also inside lists (cat, stack) and keyword arguments
            tensors = tree_flatten((args, kwargs or {}))[0]
            key = (key, tuple(tuple(a.shape) for a in tensors if torch.is_tensor(a)))
        self.ms[key] = self.ms.get(key, 0.0) + 1000 * (time.thread_time() - start)
        self.calls[key] = self.calls.get(key, 0) + 1
        return out


def profile_ops(fn: Callable[[], object], by_shape: bool = False) -> tuple[object, dict]:
    """Run fn() on one torch thread with every aten op timed -> (fn's result, {op: (thread CPU ms, calls)}).

    For comparing two implementations op by op (e.g. a list-based and a fixed-shape decoding loop): the
    calls are exact counts, the ms include a little timer overhead per op. On CUDA the ms are host time only.
    by_shape: key by (op, shapes of its tensor arguments), so the calls under one key do the same work.
    """
    timer = _OpTimer(by_shape)
    with one_thread(), timer:
        result = fn()
    return result, {key: (ms, timer.calls[key]) for key, ms in timer.ms.items()}


@torch.inference_mode()
def profile_forward(target: Transformer, n: int, context: int = 128, repeats: int = 20) -> list[tuple[str, float, int]]:
    """Per-op timing of one target forward over n new tokens after `context` cached tokens, one thread.

    Every op the forward dispatches is timed with thread CPU time (the timer itself adds a little per op).
    Returns [(op name, ms per forward, calls per forward)], most expensive first.
    """
    cache = target.new_cache(batch_size=1, max_len=context + n + 1)
    ids = random_ids(target, n, seed=2)
    timer = _OpTimer()
    with one_thread():
        target(random_ids(target, context), cache=cache)
        for _ in range(3):  # warm-up
            cache.truncate(context)
            target(ids, cache=cache)
        for _ in range(repeats):
            cache.truncate(context)
            with timer:
                target(ids, cache=cache)
    rows = [(op, ms / repeats, timer.calls[op] // repeats) for op, ms in timer.ms.items()]
    return sorted(rows, key=lambda r: r[1], reverse=True)


MATMUL_OPS = frozenset({"linear", "mm", "addmm", "matmul", "bmm",  # the matrix products of the weights; the last:
                        "_linear_pointwise"})  # mini_llm.linear's packed copy (forwards over three or more rows)


@dataclass
class MatmulSplit:
    """One forward's thread CPU ms in the weight matrix products (`MATMUL_OPS`) and in every other op, and its
    aten op calls: matmul time scales with the weights a forward reads, the rest mostly with the op count."""

    matmul_ms: float
    other_ms: float
    op_calls: int

    @property
    def total_ms(self) -> float:
        return self.matmul_ms + self.other_ms


def matmul_split(model: Transformer, n: int = 1, context: int = 128, repeats: int = 20) -> MatmulSplit:
    """`profile_forward` of one forward over n new tokens, summed into matmul ms, other ms and op calls."""
    rows = profile_forward(model, n, context, repeats)
    matmul = sum(ms for op, ms, _ in rows if op in MATMUL_OPS)
    return MatmulSplit(matmul, sum(ms for _, ms, _ in rows) - matmul, sum(calls for *_, calls in rows))


def profile_table(a: list[tuple[str, float, int]], b: list[tuple[str, float, int]], n_a: int, n_b: int,
                  top: int = 10) -> str:
    """A text table of two `profile_forward` results (at n_a and n_b new tokens): ms per forward and calls of each
    op, largest increase first, then all ops."""
    a_ops, b_ops = {op: (ms, c) for op, ms, c in a}, {op: (ms, c) for op, ms, c in b}
    ops = sorted(set(a_ops) | set(b_ops), key=lambda k: b_ops.get(k, (0.0, 0))[0] - a_ops.get(k, (0.0, 0))[0],
                 reverse=True)
    lines = [f"{'op':32s} {f'{n_a} new token(s)':>18s} {f'{n_b} new tokens':>18s} {'change':>8s}   "
             f"(thread CPU ms per forward, calls)"]
    for op in ops[:top]:
        (ms_a, c_a), (ms_b, c_b) = a_ops.get(op, (0.0, 0)), b_ops.get(op, (0.0, 0))
        lines.append(f"{op[:32]:32s} {ms_a:11.3f} ({c_a:3d}) {ms_b:11.3f} ({c_b:3d}) {ms_b - ms_a:+8.3f}")
    tot_a, tot_b = sum(v[0] for v in a_ops.values()), sum(v[0] for v in b_ops.values())
    lines.append(f"{'all ops':32s} {tot_a:17.3f} {tot_b:17.3f} {tot_b - tot_a:+8.3f}")
    return "\n".join(lines)


def compare_profiles(target: Transformer, n_a: int = 1, n_b: int = 2, context: int = 128, top: int = 10) -> str:
    """`profile_table` of the target's forwards over n_a and n_b new tokens."""
    return profile_table(profile_forward(target, n_a, context), profile_forward(target, n_b, context), n_a, n_b, top)
