"""The loop every single-sequence decoder shares: prefill, then propose, verify and commit until the budget or EOS.

The verify pass of a tree feeds [root, drafts...] with positions prefix_len + depth and mask `tree_mask(parents)`,
so every node sees exactly its own path; afterwards `cache.compact(start, path)` keeps the K/V of the accepted
path (computed in that same pass) and drops the rejected branches. A chain is the tree whose nodes each have one
child: it is verified under the plain causal mask and rolled back with `cache.truncate`.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from mini_llm import KVCache, Transformer, sample_next

from ..core.contracts import (
    GREEDY, NO_TRACE, Branching, DraftRequest, DraftTree, DynamicShape, Proposer, SamplingParams, StepResult, Trace,
)
from ..core.output import SpecOutput
from ..core.proposal import check_proposal, proposal_limits
from ..core.request import check_arguments, validate_request
from ..drafters.model import as_drafter
from .rules import PACKAGE_RULES, VerifyRules, target_forward, tree_shape


def verify(
    target: Transformer, drafter: Proposer, tree: DraftTree, cache: KVCache, sampling: SamplingParams = GREEDY,
    trace: Trace = NO_TRACE, rules: VerifyRules = PACKAGE_RULES, context: Sequence[int] = (),
) -> StepResult:
    """Verify `tree` (node 0 the root, the last committed token) in ONE target pass and keep the accepted path's
    K/V in `cache` (which holds every committed token before the root) -> StepResult.

    `rules` lay the tree out, run the pass, accept and roll the cache back (`VerifyRules`; the package's by
    default): greedy, the longest path the target agrees with (`accepted_path` on the target's argmax, read once);
    sampling, `verify_chain` / `verify_tree`, lossless. context: the committed tokens before the root, for rules
    whose `forward` reads them (the package's reads the cache).
    """
    device = target.device
    start = cache.length
    shape = tree_shape(tuple(tree.parents), device)
    n = len(tree.tokens)
    pos, mask = rules.layout(tree.parents, start, device)
    with trace.span("verify", tokens=n):
        logits, feats = rules.forward(target, drafter, context, tree, cache, pos, mask)   # [n, V]
    drafter.observe_verify(tree.tokens, tree.parents, logits)
    if sampling.greedy:
        path, next_token = rules.accept(tree.tokens, tree.parents, logits)
    else:
        path, next_token = rules.sample(tree, sampling.probs(logits), sampling.generator, shape.chain)
    rules.keep(cache, start, path, shape.chain)
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
    rules: VerifyRules = PACKAGE_RULES,
) -> SpecOutput:
    """The loop shared by chain, tree, dynamic and lookahead decoding: prefill, then until the budget or EOS:
    `drafter.propose` a tree in `shape` (never deeper than the tokens still needed, so a step never overshoots
    max_new_tokens), `verify` it, and commit the accepted drafts and the target's token.

    A feature-level drafter observes the prefill's rows, then each step's committed rows (root and accepted
    drafts, in path order), so it always holds one feature row per context token. The cache has room for the most
    nodes a proposal holds (`proposal_limits`); `check_proposal` refuses a tree it cannot verify. rules: the rules
    of every verify pass (`verify`).
    """
    start_time = time.perf_counter()
    check_arguments(target, sampling)
    drafter = as_drafter(drafter)
    request = validate_request(target.cfg, drafter.vocab_size, prompt_ids, max_new_tokens, eos_token_id)
    prompt, max_new_tokens, eos = request.prompt, request.max_new_tokens, request.eos
    out = SpecOutput()
    if max_new_tokens == 0:
        return out
    max_len = len(prompt) + max_new_tokens + proposal_limits(drafter, shape)[0] + 1
    cache = target.new_cache(batch_size=1, max_len=max_len)
    drafter.reset(max_len)
    draft_calls = drafter.calls

    with trace.span("prefill", tokens=len(prompt)):
        logits, feats = target_forward(target, drafter, torch.tensor([prompt], device=target.device), cache)
    if feats is not None:
        drafter.observe(feats)
    out.target_calls = 1
    out.tokens.append(int(sample_next(logits[-1:], sampling)))
    while len(out.tokens) < max_new_tokens and out.tokens[-1] not in eos:
        ask = DraftRequest(prompt + out.tokens[:-1], out.tokens[-1], shape, max_new_tokens - len(out.tokens) - 1,
                           sampling, trace)
        with trace.span("draft"):
            tree = drafter.propose(ask)
        check_proposal(tree, ask, drafter)
        step = verify(target, drafter, tree, cache, sampling, trace, rules, ask.context)
        if step.features is not None:
            with trace.span("observe"):
                drafter.observe(step.features)
        out.commit(step.accepted, step.next_token, step.proposed, step.depth, eos)
    out.draft_calls = drafter.calls - draft_calls
    out.seconds = time.perf_counter() - start_time
    return out

