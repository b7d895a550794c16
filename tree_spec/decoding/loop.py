"""The loop every single-sequence decoder shares: prefill, then propose, verify and commit until the budget or EOS.

The verify pass of a tree feeds [root, drafts...] with positions prefix_len + depth and mask `tree_mask(parents)`,
so every node sees exactly its own path; afterwards `cache.compact(start, path)` keeps the K/V of the accepted
path (computed in that same pass) and drops the rejected branches. A chain is the tree whose nodes each have one
child: it is verified under the plain causal mask and rolled back with `cache.truncate`.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import NamedTuple

import torch

from mini_llm import KVCache, Transformer, sample_next

from ..core.accept import accepted_path, host_argmax
from ..core.contracts import (
    GREEDY, NO_TRACE, Branching, DraftRequest, DynamicShape, Proposer, SamplingParams, StepResult, TargetFeatures,
    Trace,
)
from ..core.growth import DraftTree
from ..core.output import SpecOutput
from ..core.request import check_arguments, validate_request
from ..core.sampling import verify_chain, verify_tree
from ..core.topology import depths, tree_mask
from ..drafters.model import as_drafter


def target_forward(
    target: Transformer,
    drafter: Proposer,
    ids: torch.Tensor,
    cache: KVCache,
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, TargetFeatures | None]:
    """One target pass over ids [1, n] -> (logits [n, V], features of the n rows or None).

    Features come for free from the same pass, and only when the drafter asks for them
    (`drafter.feature_layers` is not None).
    """
    if drafter.feature_layers is None:
        return target(ids, cache=cache, positions=positions, mask=mask)[0], None
    layers = list(drafter.feature_layers)
    out = target(ids, cache=cache, positions=positions, mask=mask, return_hidden=True, hidden_layers=layers or None)
    by_layer = dict(zip(sorted(set(layers)), out[2])) if layers else {}  # the model returns them in layer order
    feats = TargetFeatures(out[1][0], tuple(by_layer[i][0] for i in layers))
    return out[0][0], feats


@functools.lru_cache(maxsize=1024)
def tree_shape(parents: tuple[int, ...], device: torch.device) -> TreeShape:
    """A tree shape's tensors, validated and built once per shape and device (a loop's trees repeat their
    shapes: a fixed branching always, an EAGLE-2 tree often)."""
    depth = depths(parents)
    chain = all(p == i - 1 for i, p in enumerate(parents))
    mask = None if chain else tree_mask(parents, device)
    return TreeShape(torch.tensor(depth, device=device), mask, max(depth), chain)


def check_proposal(tree: DraftTree, request: DraftRequest, drafter: Proposer, device: torch.device) -> None:
    """ValueError naming the drafter unless the tree it proposed for `request` is one the loop can verify: as many
    parents as tokens, parents before children, rooted at the request's root token, tokens in the vocabulary, no
    deeper than `request.max_depth` (a deeper tree would overshoot the token budget). O(n) on host lists; the
    shape's tensors (on `device`, the target's) are built once per shape (`tree_shape`), and `verify` reuses them."""
    who = type(drafter).__name__
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
        shape = tree_shape(tuple(parents), device)
    except ValueError as e:
        raise ValueError(f"{who} proposed an invalid tree: {e}") from None
    if shape.max_depth > request.max_depth:
        raise ValueError(f"{who} proposed a tree {shape.max_depth} deep, deeper than the request's max_depth "
                         f"{request.max_depth} (it would overshoot max_new_tokens)")


class TreeShape(NamedTuple):
    """depth [n] on the device, the ancestor mask [n, n] (None for a chain: causal), the depth below the root, and
    whether the tree is a chain."""

    depth: torch.Tensor
    mask: torch.Tensor | None
    max_depth: int
    chain: bool


def verify(
    target: Transformer, drafter: Proposer, tree: DraftTree, cache: KVCache, sampling: SamplingParams = GREEDY,
    trace: Trace = NO_TRACE,
) -> StepResult:
    """Verify `tree` (node 0 the root, the last committed token) in ONE target pass and keep the accepted path's
    K/V in `cache` (which holds every committed token before the root) -> StepResult.

    Greedy: the longest path the target agrees with (`accepted_path` on the target's argmax, read once).
    Sampling: `verify_chain` / `verify_tree`, lossless.
    """
    device = target.device
    start = cache.length
    ids = torch.tensor([tree.tokens], device=device)
    shape = tree_shape(tuple(tree.parents), device)
    n = len(tree.tokens)
    pos = None if shape.chain else start + shape.depth
    with trace.span("verify", tokens=n):
        logits, feats = target_forward(target, drafter, ids, cache, pos, shape.mask)   # [n, V]
    drafter.observe_verify(tree.tokens, tree.parents, logits)
    if sampling.greedy:
        predicted = host_argmax(logits)
        path = accepted_path(tree.tokens, tree.parents, predicted)
        next_token = predicted[path[-1]]
    elif shape.chain:
        n_accepted, next_token = verify_chain(tree.tokens[1:], tree.draft_probs[: n - 1].to(device),
                                              sampling.probs(logits), sampling.generator)
        path = list(range(n_accepted + 1))
    else:
        path, next_token = verify_tree(tree.tokens, tree.parents, tree.draft_probs.to(device), sampling.probs(logits),
                                       sampling.generator)
    if shape.chain:
        cache.truncate(start + len(path))
    else:
        cache.compact(start, path)
    return StepResult([tree.tokens[i] for i in path[1:]], next_token, n - 1, shape.max_depth,
                      feats and feats.rows(path))


def speculate(
    target: Transformer,
    drafter: Proposer | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    shape: Branching | DynamicShape,
    sampling: SamplingParams = GREEDY,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    trace: Trace = NO_TRACE,
    draft_room: int | None = None,
) -> SpecOutput:
    """The loop shared by chain, tree, dynamic and lookahead decoding: prefill, then until the budget or EOS:
    `drafter.propose` a tree in `shape` (never deeper than the tokens still needed, so a step never overshoots
    max_new_tokens), `verify` it, and commit the accepted drafts and the target's token.

    A feature-level drafter observes the prefill's rows, then each step's committed rows (root and accepted
    drafts, in path order), so it always holds one feature row per context token. draft_room: the most nodes a
    proposal holds (default: what `shape` allows).
    """
    start_time = time.perf_counter()
    check_arguments(target, sampling)
    drafter = as_drafter(drafter)
    request = validate_request(target.cfg, drafter.vocab_size, prompt_ids, max_new_tokens, eos_token_id)
    prompt, max_new_tokens, eos = request.prompt, request.max_new_tokens, request.eos
    out = SpecOutput()
    if max_new_tokens == 0:
        return out
    max_len = len(prompt) + max_new_tokens + (shape.max_nodes if draft_room is None else draft_room) + 1
    cache = target.new_cache(batch_size=1, max_len=max_len)
    drafter.reset(max_len)
    draft_calls = drafter.calls

    with trace.span("prefill", tokens=len(prompt)):
        logits, feats = target_forward(target, drafter, torch.tensor([prompt], device=target.device), cache)
    if feats is not None:
        drafter.observe(feats)
    out.target_calls = 1
    out.tokens.append(int(sample_next(logits[-1:], sampling.temperature, sampling.top_k, sampling.top_p,
                                      sampling.generator)))
    while len(out.tokens) < max_new_tokens and out.tokens[-1] not in eos:
        ask = DraftRequest(prompt + out.tokens[:-1], out.tokens[-1], shape, max_new_tokens - len(out.tokens) - 1,
                           sampling, trace)
        with trace.span("draft"):
            tree = drafter.propose(ask)
        check_proposal(tree, ask, drafter, target.device)
        step = verify(target, drafter, tree, cache, sampling, trace)
        if step.features is not None:
            with trace.span("observe"):
                drafter.observe(step.features)
        out.commit(step.accepted, step.next_token, step.proposed, step.depth, eos)
    out.draft_calls = drafter.calls - draft_calls
    out.seconds = time.perf_counter() - start_time
    return out

