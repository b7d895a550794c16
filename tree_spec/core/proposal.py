"""The proposer contract, checked: a draft source the loops can drive, and proposals they can verify.

Every check names the drafter's class and the rule it broke, so a custom drafter's mistake is a clear error, never
a KV-cache overflow or a failure deep inside verification:
- `check_proposer`: the `Proposer` members (a drafter that never called `Drafter.__init__` lacks some);
- `check_proposal`: the tree one `propose(request)` returned, against the request (its shape's limits, the
  budget, the vocabulary, the draft distributions sampling needs);
- `check_level_logits` / `check_rows_drawable`: what a level-wise drafter answers per tree level (`core.growth`).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .contracts import PROPOSER_MEMBERS, Branching, DraftRequest, DraftTree, DynamicShape, Proposer
from .topology import depths


def check_proposer(drafter: object) -> Proposer:
    """`drafter` as is when it has every `Proposer` member; TypeError naming its class and the members it lacks."""
    missing = [m for m in PROPOSER_MEMBERS if not hasattr(drafter, m)]
    if missing:
        raise TypeError(f"{type(drafter).__name__} is not a Proposer: it lacks {', '.join(missing)} (subclass "
                        "tree_spec.Drafter and call super().__init__(vocab_size, device), or pass a mini_llm "
                        "Transformer as the drafter)")
    return drafter


def proposal_limits(drafter: Proposer, shape: Branching | DynamicShape) -> tuple[int, int]:
    """(most draft nodes, most levels) below the root of one proposal of `drafter` for `shape`: the drafter's own
    `limits(shape)` where it declares them (a whole-tree proposer that ignores the shape, e.g. lookahead), else the
    shape's: a `Branching` tree holds `max_nodes` nodes in `depth` levels, a `DynamicShape` `total_tokens` nodes in
    `depth` levels. A loop reserves cache slots for that many nodes; `check_proposal` refuses more."""
    declared = getattr(drafter, "limits", None)
    return (shape.max_nodes, shape.depth) if declared is None else declared(shape)


def check_proposal(tree: DraftTree, request: DraftRequest, drafter: Proposer) -> None:
    """ValueError (TypeError for a wrong type) naming the drafter unless the tree it proposed for `request` is one
    the loop can verify:
    - a `DraftTree` with one parent per token, parents before children, rooted at `request.root`, tokens in the
      vocabulary;
    - at most min(`proposal_limits` depth, `request.max_depth`) levels (deeper overshoots the shape or the budget)
      and at most `proposal_limits` nodes below the root (the cache slots the loop reserved);
    - under sampling, `draft_probs` [n, V] (n = len(tokens), V = the vocabulary; a chain may leave out its leaf's
      row, [n - 1, V]): what `verify_chain` (rows 0..n-2) and `verify_tree` (all n rows) read.
    O(n) on host lists; the draft distributions' shape only (no device read)."""
    who = type(drafter).__name__
    if not isinstance(tree, DraftTree):
        raise TypeError(f"{who}.propose returned a {type(tree).__name__}: it must return a "
                        "DraftTree(tokens, parents, draft_probs)")
    tokens, parents = tree.tokens, tree.parents
    if len(tokens) != len(parents):
        raise ValueError(f"{who} proposed {len(tokens)} tokens but {len(parents)} parents: one parent per node")
    if not tokens or tokens[0] != request.root:
        raise ValueError(f"{who} proposed a tree rooted at {tokens[:1]}: node 0 must be the last committed token, "
                         f"{request.root} (DraftRequest.root)")
    if min(tokens) < 0 or max(tokens) >= drafter.vocab_size:
        raise ValueError(f"{who} proposed token {min(tokens) if min(tokens) < 0 else max(tokens)}, outside the "
                         f"vocabulary [0, {drafter.vocab_size})")
    try:
        depth = max(depths(parents))
    except ValueError as e:
        raise ValueError(f"{who} proposed an invalid tree: {e}") from None
    nodes, levels = proposal_limits(drafter, request.shape)
    if depth > min(levels, request.max_depth):
        raise ValueError(f"{who} proposed a tree {depth} deep, deeper than the {min(levels, request.max_depth)} levels "
                         f"the request allows: the lesser of its shape's depth {levels} and max_depth "
                         f"{request.max_depth} (the drafts max_new_tokens still has room for)")
    if len(tokens) - 1 > nodes:
        raise ValueError(f"{who} proposed {len(tokens) - 1} draft nodes, more than the {nodes} its request's shape "
                         f"holds ({request.shape}): the loop reserved cache slots for {nodes}")
    if not request.sampling.greedy:
        _check_draft_probs(who, tree, drafter.vocab_size)


def _check_draft_probs(who: str, tree: DraftTree, vocab_size: int) -> None:
    """ValueError naming the drafter unless a sampled tree carries draft_probs [n, V] ([n - 1, V] for a chain)."""
    n, probs = len(tree.tokens), tree.draft_probs
    if probs is None:
        raise ValueError(f"{who} proposed a tree without draft_probs under sampling: lossless verification needs "
                         f"DraftTree.draft_probs [n, V], the distribution each node's children were drawn from")
    chain = all(p == i - 1 for i, p in enumerate(tree.parents))
    if not isinstance(probs, torch.Tensor) or probs.ndim != 2 or probs.shape[1] != vocab_size or \
            probs.shape[0] not in ((n - 1, n) if chain else (n,)):
        got = tuple(probs.shape) if isinstance(probs, torch.Tensor) else type(probs).__name__
        raise ValueError(f"{who} proposed draft_probs {got} for a tree of {n} nodes: under sampling they must be "
                         f"[n, V] = [{n}, {vocab_size}] (a chain may leave out its leaf's row: [n - 1, V])")


def check_level_logits(drafter: object, logits: object, frontier: Sequence[int]) -> torch.Tensor:
    """A level-wise drafter's `next_logits` answer as is when it is a tensor [len(frontier), V] (V its vocabulary):
    one row per frontier node. TypeError / ValueError naming the drafter otherwise."""
    who = type(drafter).__name__
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{who}.next_logits returned a {type(logits).__name__}: it must return a tensor "
                        "[len(frontier), vocab_size], one row of logits per frontier node")
    want = (len(frontier), drafter.vocab_size)
    if tuple(logits.shape) != want:
        raise ValueError(f"{who}.next_logits returned shape {tuple(logits.shape)} for {len(frontier)} frontier nodes: "
                         f"it must return [len(frontier), vocab_size] = {want}, one row of logits per frontier node")
    return logits


def check_rows_drawable(drafter: object, frontier: Sequence[int], drawable: Sequence[bool]) -> None:
    """ValueError naming the drafter and the node when a level's row gives no token a chance: drawable[i] is False
    when frontier node i's row of `next_logits` (or the best child `next_top` ranks from it) has no finite logit
    (all -inf, or NaN)."""
    for node, ok in zip(frontier, drawable):
        if not ok:
            raise ValueError(f"{type(drafter).__name__}.next_logits gave frontier node {node} no finite logit (its row "
                             "is all -inf or NaN): every row needs at least one token it may draft")
