"""Cache compaction on the real model: length, slot sources (exact), next-token logits (atol/rtol 1e-3); once more
on a cache on the meta device, where an index built off the cache's device fails (judgekit.devices).

Mistakes modelled: no `start` offset, length off by one, truncate without moving, only batch row 0 moved.
"""
from types import SimpleNamespace
from typing import Any

import torch

from mini_llm import KVCache
from practice.judgekit.compare import describe, int_mismatch, tensor_mismatch, tokens_mismatch
from practice.judgekit.devices import meta_mismatch, meta_run
from practice.judgekit.gen import chain, deepest_path, random_tree
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from tree_spec import positions, tree_mask

FUNCTIONS = ("keep_path",)
NEEDS_MODEL = True
ATOL = RTOL = 1e-3
PARENTS = [-1, 0, 0, 1, 1, 2]
PREFIX = [17, 250, 31, 1042, 77, 9, 388]
PREFIX2 = [640, 3, 1500, 22, 19, 803, 5]  # the second row of the batch case
TREE = [415, 12, 96, 2048, 503, 64]
DEEP_PARENTS = random_tree(14, 5, depth_bias=0.8, levels=10)  # 14 nodes, 10 levels (LIMITS)
DEEP_TREE = [(97 * i + 13) % 4000 for i in range(14)]
NEXT = 321
SLOT_RULE = "dims: slots are dim 3, every layer, batch row and head"
META_INPUTS = "the cache"


class NoCompactCache(KVCache):
    def compact(self, start, keep):
        raise RuntimeError("cache.compact is disabled in this exercise: move the slots yourself")


def cases(ctx: Context) -> list[Case]:
    six_node = {"parents": PARENTS, "tree": TREE, "batch": 1}
    return [Case(f"path {p}", {**six_node, "path": p}, f"tree parents={PARENTS}, prefix of {len(PREFIX)} tokens")
            for p in ([0, 2, 5], [0, 1, 4], [0, 1, 3], [0])] + [
        Case("two batch rows, path [0, 2, 5]", {**six_node, "batch": 2, "path": [0, 2, 5]},
             "a cache with 2 rows: every row keeps the path"),
        Case("deep path", {"parents": DEEP_PARENTS, "tree": DEEP_TREE, "batch": 1, "path": deepest_path(DEEP_PARENTS)},
             f"path {deepest_path(DEEP_PARENTS)} of the 14-node tree parents={DEEP_PARENTS}"),
        Case("all 6 nodes of a chain", {"parents": chain(6), "tree": TREE, "batch": 1, "path": list(range(6))},
             "nothing moves: the path is the whole tree"),
        Case("cache on the meta device", {**six_node, "path": [0, 2, 5], "meta": True},
             "path [0, 2, 5] in a cache of the same shape on the meta device: its K/V must stay there"),
    ]


RULES = {
    "move slot start + path[i] (the `start` offset)": ["path [0, 2, 5]", "path [0, 1, 4]"],
    "to slot start + i, in path order": ["path [0, 2, 5]", "path [0, 1, 3]", "deep path"],
    "cache.length = start + len(path)": ["path [0]", "path [0, 2, 5]", "all 6 nodes of a chain"],
    SLOT_RULE: ["two batch rows, path [0, 2, 5]"],
    "the next token sees the kept K/V (logits atol/rtol 1e-3)": ["path [0, 2, 5]", "deep path"],
    "in place, return None; cache.compact disabled": ["path [0, 2, 5]"],
    "path is not modified (checked after every call)": ["path [0, 2, 5]"],
    "the cache's device: every index built there": ["cache on the meta device"],
}
LIMITS = [Limit("a cache with two batch rows", 2, lambda c: c.args["batch"]),
          Limit("a 10-level path through a 14-node tree", 10, lambda c: len(c.args["path"]) - 1),
          Limit("a 10-level path through a 14-node tree", 14, lambda c: len(c.args["parents"]))]


def _kv_on_meta(fns: SimpleNamespace, model: Any, case: Case) -> torch.Tensor:
    """keep_path on a cache of the case's shape on the meta device (prefix and tree written) -> the K or V tensor
    that left meta, else K."""
    start, tree = len(PREFIX), case.args["tree"]
    cache = NoCompactCache(model.cfg, 1, start + len(tree) + 2, dtype=model.dtype, device="meta")
    cache.length = start + len(tree)
    fns.keep_path(cache, start, list(case.args["path"]))
    return cache.v if cache.k.is_meta else cache.k


@torch.inference_mode()
def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {length, sources: per batch row, the original slot held by each kept slot (-1: none), next_logits
    [batch, V]} ({device, shape, dtype} of the K/V on meta) or str."""
    model = ctx.model()
    if case.args.get("meta"):
        return meta_run(lambda: _kv_on_meta(fns, model, case), "keep_path", META_INPUTS)
    device = model.device
    parents, tree, batch, path = (case.args[k] for k in ("parents", "tree", "batch", "path"))
    cache = NoCompactCache(model.cfg, batch, len(PREFIX) + len(tree) + 2, dtype=model.dtype, device=device)
    model(torch.tensor([PREFIX, PREFIX2][:batch], device=device), cache=cache)
    start = cache.length
    model(torch.tensor([tree] * batch, device=device), cache=cache, positions=positions(parents, start, device),
          mask=tree_mask(parents, device))
    before = cache.k.clone()
    out = fns.keep_path(cache, start, list(path))
    if out is not None:
        return f"keep_path must modify the cache in place and return None, got {describe(out)}."
    problem = _left_problem(cache, batch, before)
    if problem:
        return problem
    n = len(path)
    sources = [[next((s for s in range(start + len(tree)) if torch.equal(before[:, b, :, s], cache.k[:, b, :, start + i])), -1)
                for i in range(n)] for b in range(batch)]
    length = cache.length
    if not 0 < length < cache.max_len:
        return f"cache.length = {length} is outside the cache; expected start + len(path) = {start + n}."
    pos = torch.tensor([start + n], device=device)
    try:  # the judge's own forward: a failure here is what keep_path left in the cache
        logits = model(torch.tensor([[NEXT]] * batch, device=device), cache=cache, positions=pos)[:, -1]
    except Exception as e:
        return (f"after keep_path returned, the next token's forward on the cache failed ({type(e).__name__}: {e}): "
                f"keep_path left cache.k {list(cache.k.shape)}, cache.lengths {cache.lengths}; expected "
                f"{list(before.shape)} and {[start + n] * batch}. Rule: {SLOT_RULE}.")
    return {"length": length, "sources": sources, "next_logits": logits.float().cpu(), "start": start}



def _left_problem(cache: KVCache, batch: int, before: torch.Tensor) -> str | None:
    """What keep_path left wrong in the cache's shape or lengths (so that the next forward cannot run), else None."""
    if len(cache.lengths) != batch:
        return (f"keep_path left cache.lengths = {cache.lengths} ({len(cache.lengths)} row(s)) on a cache of {batch} "
                f"batch rows: every row keeps the path, so every row's length becomes start + len(path); set "
                f"`cache.length = start + len(path)` (it sets every row). Rule: cache.length = start + len(path).")
    if (cache.k.shape, cache.v.shape) != (before.shape, before.shape):
        return (f"keep_path changed the cache's tensors to cache.k {list(cache.k.shape)}, cache.v "
                f"{list(cache.v.shape)}; they keep their shape {list(before.shape)} [n_layers, batch, n_kv_heads, "
                f"max_len, head_dim]: move slots inside them (in place). Rule: {SLOT_RULE}.")
    if not cache.uniform or not all(isinstance(n, int) for n in cache.lengths):
        return (f"cache.length must be one int for every row, got cache.lengths = {cache.lengths}. "
                f"Rule: cache.length = start + len(path).")
    return None


def check(got: Any, expected: Any, case: Case) -> str | None:
    if case.args.get("meta"):
        return meta_mismatch(got, expected, "keep_path", META_INPUTS)
    if isinstance(got, str):
        return got
    start, path = expected["start"], case.args["path"]
    problem = int_mismatch(got["length"], expected["length"], "cache.length (should be start + len(path))")
    if problem:
        return problem
    for b, (row, want) in enumerate(zip(got["sources"], expected["sources"])):
        problem = tokens_mismatch(row, want, f"batch row {b}: original slot held by each kept slot")
        if problem:
            i = next(i for i, (x, y) in enumerate(zip(row, want)) if x != y)
            return (f"{problem} Slot start + {i} = {start + i} must hold node {path[i]}'s K/V (slot {start + path[i]}), "
                    f"it holds slot {row[i]}" + (" (every batch row must be moved)." if b else "."))
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
    Mistake("only batch row 0 was moved: dim 1 is the batch, move the slots of every row (cache.k[:, :, :, ...]).",
            {"keep_path": lambda cache, start, path: _move_row0(cache, start, path)}),
]


def _move_row0(cache, start, path):
    src = start + torch.tensor(path, device=cache.k.device)
    cache.k[:, 0, :, start:start + len(path)] = cache.k[:, 0, :, src]
    cache.v[:, 0, :, start:start + len(path)] = cache.v[:, 0, :, src]
    cache.length = start + len(path)
MISTAKES = with_rules(MISTAKES, RULES, [0, 2, 1, 3])  # the README rule each mistake breaks
