"""Autoregressive generation: greedy, or sampling with temperature / top-k / top-p and an explicit generator."""
from __future__ import annotations

import torch

from .model import Transformer


def logits_to_probs(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """logits [..., V] -> the sampling distribution [..., V] (fp32) after temperature, top-k and top-p.

    top-k keeps the k most likely tokens; top-p keeps the smallest set of most likely tokens whose
    mass reaches p (always at least one). Everything else gets probability exactly 0.
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0 for sampling (use temperature=0.0 in generate for greedy)")
    logits = logits.float() / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample_next(
    logits: torch.Tensor,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits [B, V] -> next token ids [B]: argmax when temperature == 0, else a seeded sample."""
    if temperature == 0.0:
        return logits.argmax(-1)
    probs = logits_to_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.inference_mode()
def generate(
    model: Transformer,
    ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | list[int] | None = None,
) -> torch.Tensor:
    """Plain decoding, one target forward per token. ids [B, T] -> new tokens [B, n], n <= max_new_tokens.

    Stops early once every row has produced an EOS token; rows that finished first are padded with
    their EOS token.
    """
    if ids.ndim == 1:
        ids = ids[None]
    ids = ids.to(model.device)
    B, T = ids.shape
    if max_new_tokens < 1:
        return ids.new_empty(B, 0)
    cache = model.new_cache(batch_size=B, max_len=T + max_new_tokens)
    eos = torch.as_tensor([eos_token_id] if isinstance(eos_token_id, int) else (eos_token_id or []), device=ids.device)
    out = ids.new_empty(B, max_new_tokens)
    done = torch.zeros(B, dtype=torch.bool, device=ids.device)
    logits = model(ids, cache=cache)[:, -1]
    for step in range(max_new_tokens):
        token = sample_next(logits, temperature, top_k, top_p, generator)
        if len(eos):
            token = torch.where(done, out[:, step - 1] if step else token, token)
            done |= torch.isin(token, eos)
        out[:, step] = token
        if step + 1 == max_new_tokens or (len(eos) and bool(done.all())):
            return out[:, : step + 1]
        logits = model(token[:, None], cache=cache)[:, -1]
    return out
