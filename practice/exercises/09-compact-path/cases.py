"""Cache compaction on the real model: length, slot sources (exact), next-token logits (atol/rtol 1e-3).

Mistakes modelled: no `start` offset, length off by one, truncate without moving.
"""
from types import SimpleNamespace
from typing import Any

import torch

from mini_llm import KVCache
from practice.judgekit.compare import describe, int_mismatch, tensor_mismatch, tokens_mismatch
from practice.judgekit.spec import Case, Context, Mistake
from tree_spec import positions, tree_mask

FUNCTIONS = ("keep_path",)
NEEDS_MODEL = True
ATOL = RTOL = 1e-3
PARENTS = [-1, 0, 0, 1, 1, 2]
PREFIX = [17, 250, 31, 1042, 77, 9, 388]
TREE = [415, 12, 96, 2048, 503, 64]
NEXT = 321


class NoCompactCache(KVCache):
    def compact(self, start, keep):
        raise RuntimeError("cache.compact is disabled in this exercise: move the slots yourself")


def cases(ctx: Context) -> list[Case]:
    return [Case(f"path {p}", {"path": p}, f"tree parents={PARENTS}, prefix of {len(PREFIX)} tokens")
            for p in ([0, 2, 5], [0, 1, 4], [0, 1, 3], [0])]


@torch.inference_mode()
def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {length, sources: original slot held by each kept slot (-1: none), next_logits [V]} or str."""
    model = ctx.model()
    device = model.device
    cache = NoCompactCache(model.cfg, 1, len(PREFIX) + len(TREE) + 2, dtype=model.dtype, device=device)
    model(torch.tensor([PREFIX], device=device), cache=cache)
    start = cache.length
    model(torch.tensor([TREE], device=device), cache=cache, positions=positions(PARENTS, start, device),
          mask=tree_mask(PARENTS, device))
    before = cache.k.clone()
    out = fns.keep_path(cache, start, list(case.args["path"]))
    if out is not None:
        return f"keep_path must modify the cache in place and return None, got {describe(out)}."
    if not isinstance(cache.length, int):
        return f"cache.length must be an int, got {describe(cache.length)}."
    n = len(case.args["path"])
    sources = []
    for i in range(n):
        slot = cache.k[:, :, :, start + i]
        sources.append(next((s for s in range(start + len(TREE)) if torch.equal(before[:, :, :, s], slot)), -1))
    length = cache.length
    if not 0 < length < cache.max_len:
        return f"cache.length = {length} is outside the cache; expected start + len(path) = {start + n}."
    pos = torch.tensor([start + n], device=device)
    logits = model(torch.tensor([[NEXT]], device=device), cache=cache, positions=pos)[0, -1]
    return {"length": length, "sources": sources, "next_logits": logits.float().cpu(), "start": start}


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    start, path = expected["start"], case.args["path"]
    problem = int_mismatch(got["length"], expected["length"], "cache.length (should be start + len(path))")
    if problem:
        return problem
    problem = tokens_mismatch(got["sources"], expected["sources"], "original slot held by each kept slot")
    if problem:
        i = next(i for i, (a, b) in enumerate(zip(got["sources"], expected["sources"])) if a != b)
        return (f"{problem} Slot start + {i} = {start + i} must hold node {path[i]}'s K/V (slot {start + path[i]}), "
                f"it holds slot {got['sources'][i]}.")
    return tensor_mismatch(got["next_logits"], expected["next_logits"], "next-token logits", ATOL, RTOL)


def _move(cache, start, path, offset, length_delta):
    src = offset + torch.tensor(path, device=cache.k.device)
    cache.k[:, :, :, start:start + len(path)] = cache.k[:, :, :, src]
    cache.v[:, :, :, start:start + len(path)] = cache.v[:, :, :, src]
    cache.length = start + len(path) + length_delta


MISTAKES = [
    Mistake("the source slots lack the `start` offset: node i of the tree lives at slot start + i, so move "
            "slot start + path[i] (not path[i], which is inside the prefix).",
            {"keep_path": lambda cache, start, path: _move(cache, start, path, 0, 0)}),
    Mistake("cache.length is off by one: the root and every accepted node stay, so length = start + len(path).",
            {"keep_path": lambda cache, start, path: _move(cache, start, path, start, -1)}),
    Mistake("the cache was truncated but the accepted nodes' K/V were not moved: slot start + i must receive "
            "slot start + path[i].", {"keep_path": lambda cache, start, path: setattr(cache, "length", start + len(path))}),
]
