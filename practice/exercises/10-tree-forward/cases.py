"""Tree-masked forward on the real model: logits [n, V] float32 vs the reference, atol/rtol 1e-3; once more on
the model's twin on the meta device, where a tensor built off the model's device fails (judgekit.devices).

Mistakes modelled: no mask (causal), sequence positions (no depth), positions off by one.
"""
from types import SimpleNamespace
from typing import Any

import torch

from torch.nn.modules.module import register_module_forward_pre_hook

from mini_llm import Transformer
from practice.judgekit.compare import tensor_mismatch
from practice.judgekit.devices import meta_mismatch, meta_run
from practice.judgekit.gen import tree_suite
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from tree_spec import depths, tree_mask

FUNCTIONS = ("tree_logits",)
NEEDS_MODEL = True
ATOL = RTOL = 1e-3
MAX_FORWARDS = 2
META_INPUTS = "the model"
PREFIX = [5, 1203, 48, 733, 12, 2901]
TREES = [
    ("chain", [-1, 0, 1, 2], [88, 301, 17, 1500]),
    ("six-node tree", [-1, 0, 0, 1, 1, 2], [415, 12, 96, 2048, 503, 64]),
    ("[2,2,1,1] tree", [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10],
     [40, 7, 1001, 250, 251, 36, 3999, 12, 19, 640, 8, 2222, 91, 13, 700]),
]


LONG_PREFIX = [(37 * i + 11) % 4000 for i in range(150)]
GENERATED = [(name, parents, [(53 * i + 7 * len(parents)) % 4000 for i in range(len(parents))])
             for name, parents in tree_suite(seed=10) if len(parents) <= 31]
RULES = {
    "positions prefix_len + depth": ["six-node tree", "[2,2,1,1] tree", "wide star of 12"],
    "the tree mask (ancestors only)": ["six-node tree", "[2,2,1,1] tree", "static [3, 3, 2] tree"],
    "logits [n, V] float32 (atol/rtol 1e-3)": [name for name, _, _ in TREES],
    "ONE forward over the tree (at most 2 in all)": [name for name, _, _ in TREES],
    "a one-node tree, deep trees": ["single node", "deep chain of 9", "deep random tree of 20"],
    "a cache sized for the inputs (no fixed buffer)": ["six-node tree after a 150-token prefix"],
    "prefix, tokens and parents are not modified (checked after every call)": ["chain"],
    "the model's device: every tensor built there": ["model on the meta device"],
}
LIMITS = [Limit("random trees of 12 and 20 nodes", 20, lambda c: len(c.args["parents"])),
          Limit("the 6-node tree after a 150-token prefix", 150, lambda c: len(c.args["prefix"]))]


def cases(ctx: Context) -> list[Case]:
    return [Case(name, {"prefix": PREFIX, "tokens": t, "parents": p}, f"parents={p}")
            for name, p, t in TREES + GENERATED] + [
        Case("six-node tree after a 150-token prefix", {"prefix": LONG_PREFIX, "tokens": TREES[1][2],
                                                       "parents": TREES[1][1]}, "a long prefix"),
        Case("model on the meta device", {"prefix": PREFIX, "tokens": TREES[1][2], "parents": TREES[1][1],
                                          "meta": True}, "the six-node tree on the model's twin on the meta device")]


def meta_twin(model: Transformer) -> Transformer:
    """The model's architecture on the meta device (no weights to copy: meta holds no data)."""
    with torch.device("meta"):
        return Transformer(model.cfg).to(model.dtype).eval()


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> logits [n, V] on the CPU ({device, shape, dtype} on meta), or a str when more than MAX_FORWARDS forwards
    were used or the meta run failed."""
    model = ctx.model()
    if case.args.get("meta"):
        twin = meta_twin(model)
        return meta_run(lambda: fns.tree_logits(twin, list(case.args["prefix"]), list(case.args["tokens"]),
                                                list(case.args["parents"])), "tree_logits", META_INPUTS)
    embed = model.embed_tokens
    calls = []  # counted at the token embedding, which every forward runs, by a global hook the learner never sees

    def count(module: torch.nn.Module, args: Any) -> None:
        if module is embed:
            calls.append(1)

    hook = register_module_forward_pre_hook(count)
    try:
        logits = fns.tree_logits(model, list(case.args["prefix"]), list(case.args["tokens"]), list(case.args["parents"]))
    finally:
        hook.remove()
    if len(calls) > MAX_FORWARDS:
        return (f"tree_logits used {len(calls)} forward calls; prefill the prefix once and verify the whole tree "
                f"in ONE forward (positions + tree mask). Rule: ONE forward over the tree (at most 2 in all).")
    return logits.detach().cpu() if isinstance(logits, torch.Tensor) else logits


def check(got: Any, expected: Any, case: Case) -> str | None:
    if case.args.get("meta"):
        return meta_mismatch(got, expected, "tree_logits", META_INPUTS)
    if isinstance(got, str):
        return got
    problem = tensor_mismatch(got, expected, "logits", ATOL, RTOL)
    if problem is None or not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
        return problem
    bad = [i for i in range(len(got)) if not torch.allclose(got[i], expected[i], atol=ATOL, rtol=RTOL)]
    return f"{problem} Wrong rows (nodes): {bad}."


def _forward(model, prefix, tokens, parents, mask_fn, pos_fn):
    device = model.device
    with torch.inference_mode():
        cache = model.new_cache(1, len(prefix) + len(tokens) + 1)
        model(torch.tensor([prefix], device=device), cache=cache)
        pos = torch.tensor(pos_fn(len(prefix), parents), device=device)
        return model(torch.tensor([tokens], device=device), cache=cache, positions=pos, mask=mask_fn(parents, device))[0]


def _depth_pos(n, parents):
    return [n + d for d in depths(parents)]


def _index_pos(n, parents):
    return [n + i for i in range(len(parents))]


def _late_pos(n, parents):
    return [n + 1 + d for d in depths(parents)]


def _causal(parents, device):
    return torch.ones(len(parents), len(parents), dtype=torch.bool, device=device).tril()


MISTAKES = [
    Mistake("the nodes attend causally (no tree mask): node i must see only the prefix, its ancestors and "
            "itself, not its siblings or cousins.",
            {"tree_logits": lambda m, pre, t, p: _forward(m, pre, t, p, _causal, _depth_pos)}),
    Mistake("the nodes got sequence positions (prefix_len + index); a node's RoPE position is prefix_len + depth.",
            {"tree_logits": lambda m, pre, t, p: _forward(m, pre, t, p, tree_mask, _index_pos)}),
    Mistake("positions are off by one: the root sits at prefix_len, a node at prefix_len + depth.",
            {"tree_logits": lambda m, pre, t, p: _forward(m, pre, t, p, tree_mask, _late_pos)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [1, 0, 0])  # the README rule each mistake breaks
