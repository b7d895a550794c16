"""EAGLE-2 expand + rerank on a fixed random draft table: tokens and parents exact.

Mistakes modelled: no frontier pruning, root counted in total_tokens, frontier by local log-prob,
rerank by local log-prob, rerank ties broken by the higher node id, children of equal log-prob in torch.topk's
order (not token-id order), the frontier expanded in node-id order. The tie case uses a draft whose every
node has the same log-prob values in a different token order, so sums along two paths tie exactly.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import describe, tokens_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

FUNCTIONS = ("eagle2_tree",)
NEEDS_MODEL = False
V, ROOT = 10, 3
SETUPS = [(3, 2, 8), (4, 3, 12), (5, 2, 10)]


def next_logprobs(path: list[int]) -> torch.Tensor:
    """A fixed 'draft': log-probs [V] seeded by the path, some nodes confident, others unsure."""
    seed = 0
    for token in path:
        seed = (seed * 1_000_003 + token + 1) % 2_147_483_647
    g = torch.Generator().manual_seed(seed)
    sharpness = 0.5 + 5.0 * torch.rand((), generator=g)
    return torch.log_softmax(torch.randn(V, generator=g) * sharpness, dim=-1)


TIED = torch.tensor([0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.01, 0.006, 0.003, 0.001]).log()


def tied_logprobs(path: list[int]) -> torch.Tensor:
    """A 'draft' whose every row holds the same log-probs TIED [V], permuted by the path: a + b == b + a, so
    two depth-2 nodes (ranks (0, 1) and (1, 0)) tie exactly."""
    seed = 0
    for token in path:
        seed = (seed * 1_000_003 + token + 1) % 2_147_483_647
    return TIED[torch.randperm(V, generator=torch.Generator().manual_seed(seed))]


SAME = torch.tensor([0.25, 0.25, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]).log()


def token_tied_logprobs(path: list[int]) -> torch.Tensor:
    """A 'draft' whose rows hold equal log-probs at several tokens (two at 0.25, three at 0.1, ...), placed by
    the path: the order among equal log-probs (lower token id first) decides the children and their order."""
    seed = 7
    for token in path:
        seed = (seed * 1_000_003 + token + 1) % 2_147_483_647
    return SAME[torch.randperm(V, generator=torch.Generator().manual_seed(seed))]


DRAFTS = {"random": next_logprobs, "tied": tied_logprobs, "token ties": token_tied_logprobs}


def _setting(root: int, depth: int, top_k: int, total: int, draft: str = "random") -> Case:
    return Case(f"root={root}, depth={depth}, top_k={top_k}, total_tokens={total}" + (f", {draft} draft" if draft != "random" else ""),
                {"root": root, "depth": depth, "top_k": top_k, "total_tokens": total, "draft": draft}, f"V = {V}")


def cases(ctx: Context) -> list[Case]:
    return [_setting(ROOT, d, k, t) for d, k, t in SETUPS] + [
        Case("tied scores: lower node id first",
             {"root": ROOT, "depth": 2, "top_k": 2, "total_tokens": 4, "draft": "tied"},
             "nodes 4 and 5 have the same score; only one of them fits in total_tokens"),
        *(_setting(root, d, k, t) for root in (0, 7, 9) for d, k, t in ((3, 2, 8), (4, 3, 12))),
        _setting(5, 6, 2, 12), _setting(1, 1, 4, 4), _setting(2, 5, 1, 5), _setting(6, 3, 3, 0),
        *(_setting(root, d, k, t, "token ties") for root, d, k, t in ((0, 2, 3, 6), (4, 3, 2, 7), (8, 2, 4, 9))),
    ]


RULES = {
    "score = cumulative log-prob along the path": ["root=3, depth=3, top_k=2, total_tokens=8",
                                                   "root=3, depth=4, top_k=3, total_tokens=12"],
    "each later step expands only the top_k nodes of the previous step": ["root=3, depth=4, top_k=3, total_tokens=12"],
    "the frontier is expanded highest score first (node ids follow)": ["root=0, depth=4, top_k=3, total_tokens=12",
                                                                       "root=5, depth=6, top_k=2, total_tokens=12"],
    "children: the top_k tokens, most likely first, ties lower token id first": [
        "root=0, depth=2, top_k=3, total_tokens=6, token ties draft", "root=4, depth=3, top_k=2, total_tokens=7, token ties draft"],
    "rerank: total_tokens nodes besides the root, ties lower node id first": ["tied scores: lower node id first",
                                                                              "root=5, depth=6, top_k=2, total_tokens=12"],
    "output re-indexed in node-id order": ["root=3, depth=5, top_k=2, total_tokens=10"],
    "edge sizes: one step, a chain (top_k = 1), total_tokens = 0": ["root=1, depth=1, top_k=4, total_tokens=4",
                                                                    "root=2, depth=5, top_k=1, total_tokens=5",
                                                                    "root=6, depth=3, top_k=3, total_tokens=0"],
}
LIMITS = [Limit("six levels deep", 6, lambda c: c.args["depth"]),
          Limit("total_tokens = 0", 0, lambda c: c.args["total_tokens"], at_most=True)]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    args = dict(case.args)
    out = fns.eagle2_tree(args.pop("root"), DRAFTS[args.pop("draft")], **args)
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"eagle2_tree must return (tokens, parents), got {describe(out)}."
    return out


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    problem = tokens_mismatch(got[1], expected[1], "parents") or tokens_mismatch(got[0], expected[0], "tokens")
    return f"{problem}{_table(case)}" if problem else None


def _table(case: Case) -> str:
    """The rule's created nodes for the case (id: token, parent, cumulative score; * kept by the rerank) and any tie
    at the rerank's cut, for a failing case's message."""
    a = case.args
    tokens, parents, score = _expand(a["root"], DRAFTS[a["draft"]], a["depth"], a["top_k"])
    ranked = sorted(range(1, len(tokens)), key=lambda i: (-score[i], i))
    kept, cut = set(ranked[:a["total_tokens"]]), a["total_tokens"]
    rows = ", ".join(f"{i}: {tokens[i]} <- {parents[i]}, {score[i]:.3f}{'*' if i in kept else ''}"
                     for i in range(1, len(tokens)))
    tie = ""
    if 0 < cut < len(ranked) and score[ranked[cut - 1]] == score[ranked[cut]]:
        tie = (f" Nodes {ranked[cut - 1]} and {ranked[cut]} tie at score {score[ranked[cut]]:.4f} at the cut: the "
               f"lower id, {ranked[cut - 1]}, is kept.")
    return (f"\n      The rule's nodes (id: token <- parent, cumulative score; * kept, the {cut} highest scores, ties "
            f"lower id first): {rows}.{tie}")


def _variant(**mistake):
    return lambda root, fn, depth, top_k, total_tokens: _eagle2(root, fn, depth, top_k, total_tokens, **mistake)


def _top(logprobs: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top_k (values, token ids), most likely first, equal values in token-id order."""
    values, ids = torch.sort(logprobs, descending=True, stable=True)
    return values[:top_k], ids[:top_k]


def _expand(root, fn, depth, top_k) -> tuple[list[int], list[int], list[float]]:
    """The rule's expansion (no rerank): every created node's token, parent and cumulative score, root first."""
    tokens, parents, score, _ = _grown(root, fn, depth, top_k)
    return tokens, parents, score


def _eagle2(root, fn, depth, top_k, total_tokens, keep_delta=0, rank_key="score", ties_high_id=False, **grow):
    tokens, parents, score, local = _grown(root, fn, depth, top_k, **grow)
    key = score if rank_key == "score" else local
    if total_tokens + keep_delta < 0:  # the root counted in total_tokens = 0: not even the root is kept
        return [], []
    kept = set(sorted(range(1, len(tokens)), key=lambda i: (-key[i], -i if ties_high_id else i))[:total_tokens + keep_delta])
    for i in list(kept):  # close the set under parents so the mistake still yields a tree
        while parents[i] > 0:
            i = parents[i]
            kept.add(i)
    order = [0] + sorted(kept)
    new_id = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [-1] + [new_id[parents[i]] for i in order[1:]]


def _grown(root, fn, depth, top_k, prune=True, frontier_key="score", top=_top, frontier_by_id=False):
    """Expansion `depth` steps (with a modelled mistake) -> tokens, parents, cumulative and local log-probs."""
    tokens, parents, score, local, paths = [root], [-1], [0.0], [0.0], [[root]]
    frontier = [0]
    for _ in range(depth):
        created = []
        for node in frontier:
            values, ids = top(fn(paths[node]), top_k)
            for lp, tok in zip(values.tolist(), ids.tolist()):
                created.append(len(tokens))
                tokens.append(tok)
                parents.append(node)
                score.append(score[node] + lp)
                local.append(lp)
                paths.append(paths[node] + [tok])
        key = score if frontier_key == "score" else local
        frontier = sorted(created, key=lambda i: -key[i])[:top_k] if prune else created
        if frontier_by_id:
            frontier = sorted(frontier)
    return tokens, parents, score, local


MISTAKES = [
    Mistake("every node created in a step was expanded; expand only the top_k of them by cumulative score.",
            {"eagle2_tree": _variant(prune=False)}),
    Mistake("total_tokens counts the drafted nodes only: keep total_tokens nodes plus the root.",
            {"eagle2_tree": _variant(keep_delta=-1)}),
    Mistake("the frontier was chosen by the child's own log-prob; rank by the cumulative score (sum along the path).",
            {"eagle2_tree": _variant(frontier_key="local")}),
    Mistake("the rerank used each node's own log-prob; rank by the cumulative score (sum along the path).",
            {"eagle2_tree": _variant(rank_key="local")}),
    Mistake("a rerank tie went to the higher node id; of nodes with equal scores keep the LOWER node id first "
            "(sort by (-score, node id)).", {"eagle2_tree": _variant(ties_high_id=True)}),
    Mistake("children with equal log-probs must come in token-id order (lower token id first); torch.topk does not "
            "promise any order among equal values: sort with torch.sort(logprobs, descending=True, stable=True).",
            {"eagle2_tree": _variant(top=lambda lp, k: torch.topk(lp, k))}),
    Mistake("the frontier was expanded in node-id order; expand it highest cumulative score first (the new nodes' "
            "ids follow that order).", {"eagle2_tree": _variant(frontier_by_id=True)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [1, 4, 0, 0, 4, 3, 2])  # the README rule each mistake breaks
