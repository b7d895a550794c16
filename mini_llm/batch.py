"""Batched plain decoding: B prompts of any lengths, one forward per step for every unfinished row.

Rows live in one KVCache with a length per row; a row that finishes (EOS or budget) is dropped from the
batch (`cache.select_rows`), so the others never wait for it and it costs nothing after it is done.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .cache import KVCache
from .generate import check_budget, eos_token_ids, prompt_tensor
from .model import Transformer
from .sampling import SamplingParams, sample_next


def extend_rows(model: Transformer, cache: KVCache, rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """Append rows[b] (any length >= 1) to cache row b in ONE forward -> logits after each row's last
    new token [B, V].

    Shorter rows are right-padded to the longest (causal attention: a token never sees the padding after
    it); each row's length is then cut back to its real tokens, so the padding's slots are overwritten by
    the next forward and never read. This is the prefill of a batch, and the catch-up of a drafter.
    """
    if len(rows) != cache.batch_size or not all(len(r) for r in rows):
        raise ValueError(f"need one non-empty token list per cache row ({cache.batch_size}), got {len(rows)}")
    width = max(len(r) for r in rows)
    ids = torch.tensor([list(r) + [r[-1]] * (width - len(r)) for r in rows], device=model.device)  # [B, width]
    ends = [n + len(r) for n, r in zip(cache.lengths, rows)]
    logits = model(ids, cache=cache)  # [B, width, V]
    cache.truncate(ends)
    last = torch.tensor([len(r) - 1 for r in rows], device=model.device)
    return logits[torch.arange(len(rows), device=model.device), last]


def _token_lists(prompts: Sequence[Sequence[int]], vocab_size: int | None = None) -> list[list[int]]:
    """Validate a batch of prompts: a non-empty list of non-empty token lists (or [T] tensors), each checked as
    `prompt_tensor` checks one prompt (ids in [0, vocab_size) when given) -> list of token lists."""
    if isinstance(prompts, (torch.Tensor, str, bytes)) or not len(prompts):
        raise ValueError("prompts must be a non-empty list of token lists, one per row")
    rows = []
    for b, prompt in enumerate(prompts):
        if not isinstance(prompt, (Sequence, torch.Tensor)) or isinstance(prompt, (str, bytes)):
            raise ValueError(f"prompts[{b}] is {prompt!r}, not a token list: prompts is a list of token lists, one per "
                             "row (for one prompt pass [prompt])")
        try:
            ids = prompt_tensor(prompt, vocab_size)
        except ValueError as e:
            raise ValueError(f"prompts[{b}]: {e}") from None
        if ids.shape[0] != 1:
            raise ValueError(f"prompts[{b}] must be one token list, got shape {tuple(ids.shape)}")
        rows.append(ids[0].tolist())
    return rows


@torch.inference_mode()
def generate_batch(
    model: Transformer,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | None = None,
) -> list[list[int]]:
    """Plain decoding of B prompts (token lists of any lengths) at once -> the new tokens of each row.

    One target forward per step for all unfinished rows. A row ends at its EOS token (kept) or after
    max_new_tokens. Greedy row b equals `generate(model, prompts[b], max_new_tokens)`, cut after EOS.
    """
    sampling = SamplingParams(temperature, top_k, top_p, generator)
    rows = _token_lists(prompts, model.cfg.vocab_size)
    max_new_tokens = check_budget(max(map(len, rows)), max_new_tokens, model.cfg.max_position_embeddings)
    eos = set(eos_token_ids(eos_token_id, model.cfg.vocab_size))
    out: list[list[int]] = [[] for _ in rows]
    if max_new_tokens == 0:
        return out
    cache = model.new_cache(batch_size=len(rows), max_len=max(map(len, rows)) + max_new_tokens)
    active = list(range(len(rows)))                 # out[] index of each cache row
    logits = extend_rows(model, cache, rows)        # prefill: [B, V]
    while True:
        tokens = sample_next(logits, sampling).tolist()
        for row, token in zip(active, tokens):
            out[row].append(token)
        keep = [i for i, row in enumerate(active) if out[row][-1] not in eos and len(out[row]) < max_new_tokens]
        if not keep:
            return out
        if len(keep) < len(active):                 # finished rows leave the batch
            cache.select_rows(keep)
            active, tokens = [active[i] for i in keep], [tokens[i] for i in keep]
        logits = model(torch.tensor(tokens, device=model.device)[:, None], cache=cache)[:, -1]
