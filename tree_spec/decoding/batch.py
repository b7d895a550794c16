"""Batched chain speculative decoding: B prompts of any lengths, rows that accept different numbers of tokens.

Each step, for all unfinished rows at once: (1) the drafter proposes up to k tokens per row, (2) ONE
target forward verifies [root, d_1..d_k] of every row, (3) each row accepts its own prefix (greedy
comparison, or the lossless `verify_chain`), (4) each row's cache rolls back to root + accepted
(`cache.truncate(per-row lengths)`), (5) rows that hit EOS or their budget leave the batch
(`cache.select_rows`) while the others go on. The KV cache has a length per row (mini_llm.KVCache).
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from mini_llm import Transformer, sample_next
from mini_llm.batch import extend_rows

from ..core.accept import accept_chain_greedy
from ..core.contracts import GREEDY, NO_TRACE, BatchProposer, Proposer, SamplingParams, Trace, check_k
from ..core.output import SpecOutput
from ..core.request import check_arguments, validate_request
from ..core.sampling import verify_chain
from ..drafters.batch import as_batch_drafter


@torch.inference_mode()
def batch_speculative_generate(
    target: Transformer,
    drafter: Proposer | Transformer | BatchProposer,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    k: int = 4,
    sampling: SamplingParams = GREEDY,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    trace: Trace = NO_TRACE,
) -> list[SpecOutput]:
    """Chain speculative decoding of B prompts (token lists of any lengths) at once -> one SpecOutput per row.

    Per step, one draft pass (k draft forwards for a model) and ONE target verify forward for every
    unfinished row; each row accepts its own number of drafts. Greedy row b equals
    `generate(target, prompts[b], max_new_tokens)` (cut after EOS); sampling accepts each row with
    `verify_chain`, so each row follows the target's distribution. A row drafts min(k, tokens it still
    needs - 1); its SpecOutput counts the verify passes and draft forwards it took part in, and
    `seconds` is the whole batch's wall time.
    """
    start_time = time.perf_counter()
    check_arguments(target, sampling)
    k = check_k(k)
    draft = as_batch_drafter(drafter)
    request = validate_request(target.cfg, draft.vocab_size, None, max_new_tokens, eos_token_id, prompts=prompts)
    rows, max_new_tokens, eos = request.prompts, request.max_new_tokens, request.eos
    outs = [SpecOutput() for _ in rows]
    if max_new_tokens == 0:
        return outs
    device = target.device
    max_len = max(map(len, rows)) + max_new_tokens + k  # a row that needs fewer drafts is padded to the batch's
    if max_len > target.cfg.max_position_embeddings:
        raise ValueError(f"longest prompt + max_new_tokens + k ({max_len}) exceeds max_position_embeddings "
                         f"({target.cfg.max_position_embeddings})")
    cache = target.new_cache(batch_size=len(rows), max_len=max_len)
    draft.start(len(rows), max_len)

    def unfinished(b: int) -> bool:
        return outs[b].tokens[-1] not in eos and len(outs[b].tokens) < max_new_tokens

    # prefill: one target forward over all prompts gives each row its first token (the first root)
    with trace.span("prefill", tokens=sum(map(len, rows))):
        logits = extend_rows(target, cache, rows)
    first = sample_next(logits, sampling).tolist()
    for out, token in zip(outs, first):
        out.target_calls, out.tokens = 1, [token]
    active = list(range(len(rows)))  # outs[] index of each cache row
    while True:
        keep = [i for i, b in enumerate(active) if unfinished(b)]
        if not keep:
            break
        if len(keep) < len(active):  # finished rows leave the batch; the others go on
            cache.select_rows(keep)
            draft.select_rows(keep)
            active = [active[i] for i in keep]
        # 1. draft: row i needs depth[i] <= k drafts (never past its budget); the batch drafts the deepest
        depth = [min(k, max_new_tokens - len(outs[b].tokens) - 1) for b in active]
        n_draft = max(depth)
        contexts = [rows[b] + outs[b].tokens for b in active]
        if n_draft:
            with trace.span("draft"):
                drafts, draft_probs = draft.propose(contexts, n_draft, sampling)
            depth = [min(d, len(x)) for d, x in zip(depth, drafts)]   # a proposer may draft fewer than asked
        else:  # every row needs exactly one more token: a plain target step
            drafts = [[] for _ in active]
            draft_probs = torch.zeros(len(active), 0, target.cfg.vocab_size, device=device)
        # 2. verify: ONE target forward over [root, d_1..d_n] of every row -> [B, n + 1, V]
        starts = cache.lengths
        fed = torch.tensor([[ctx[-1]] + d + [ctx[-1]] * (n_draft - len(d)) for ctx, d in zip(contexts, drafts)],
                           device=device)   # short proposals padded; `depth` keeps the padding from being accepted
        with trace.span("verify", tokens=fed.numel()):
            logits = target(fed, cache=cache)
        # 3. accept per row: the longest agreeing prefix (greedy) or the rejection rule (sampling)
        if sampling.greedy:
            n_accepted, next_tokens = (x.tolist() for x in accept_chain_greedy(
                fed[:, 1:], logits, torch.tensor(depth, device=device)))
        else:
            target_probs = sampling.probs(logits)                                        # [B, n + 1, V]
            verdicts = [verify_chain(drafts[i][:d], draft_probs[i, :d].to(device), target_probs[i, :d + 1],
                                     sampling.generator) for i, d in enumerate(depth)]
            n_accepted, next_tokens = (list(x) for x in zip(*verdicts))
        # 4. roll back: each row keeps its root + accepted drafts
        cache.truncate([s + 1 + n for s, n in zip(starts, n_accepted)])
        # 5. commit, each row up to its first EOS
        for i, b in enumerate(active):
            outs[b].commit(drafts[i][:n_accepted[i]], next_tokens[i], depth[i], depth[i], eos)
            outs[b].draft_calls += n_draft
    seconds = time.perf_counter() - start_time
    for out in outs:
        out.seconds = seconds
    return outs
