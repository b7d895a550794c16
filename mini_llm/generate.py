"""Autoregressive generation: greedy, or sampling with temperature / top-k / top-p and an explicit generator."""
from __future__ import annotations

import operator
from collections.abc import Sequence

import torch

from .model import Transformer
from .sampling import SamplingParams, sample_next


# ---------------------------------------------------------------- argument checks shared with tree_spec's loops

def as_int(value, name: str) -> int:
    """An integer argument (int, numpy integer, one-element integer tensor) -> int; anything else -> ValueError.

    Refuses floats and bools rather than truncating them (`max_new_tokens=2.5` is a mistake, not 2).
    """
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def eos_token_ids(eos_token_id, vocab_size: int | None = None) -> list[int]:
    """eos_token_id as None, an int, a numpy integer, a list of them, or an integer tensor -> list[int]; given
    `vocab_size`, an id outside [0, vocab_size) -> ValueError (no token could ever match it).

    Every loop (`generate`, chain, tree, dynamic, lookahead, batched) reads it through here, so all forms mean the same.
    """
    if eos_token_id is None:
        return []
    if isinstance(eos_token_id, torch.Tensor):
        if eos_token_id.is_floating_point() or eos_token_id.is_complex():
            raise ValueError(f"eos_token_id must hold integers, got a {eos_token_id.dtype} tensor")
        ids = [int(t) for t in eos_token_id.flatten().tolist()]
    else:
        try:
            ids = [as_int(eos_token_id, "eos_token_id")]
        except ValueError:
            if isinstance(eos_token_id, (str, bytes)) or not hasattr(eos_token_id, "__iter__"):
                raise
            ids = [as_int(t, "eos_token_id") for t in eos_token_id]
    outside = [i for i in ids if vocab_size is not None and not 0 <= i < vocab_size]
    if outside:
        raise ValueError(f"eos_token_id {outside[0]} is outside the model's vocabulary [0, {vocab_size})")
    return ids


def prompt_tensor(ids: torch.Tensor | Sequence[int], vocab_size: int | None = None) -> torch.Tensor:
    """A prompt as LongTensor [B, T] (T >= 1): a list or [T] tensor becomes one row; ValueError naming the problem
    for float ids, an empty prompt, a string (encode it first) or, given `vocab_size`, an id outside [0, vocab_size)."""
    if isinstance(ids, (str, bytes)):
        raise ValueError(f"the prompt must be token ids, got text {ids[:40]!r}: encode it first (tokenizer.encode)")
    if not isinstance(ids, torch.Tensor):
        ids = torch.tensor([as_int(t, "prompt token") for t in ids], dtype=torch.long, device="cpu")
    if ids.numel() == 0:  # before the dtype: torch.tensor([[]]) is a float tensor
        raise ValueError("the prompt is empty: decoding needs at least one prompt token")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"prompt ids must be an integer tensor, got {ids.dtype} (token ids are not rounded)")
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2:
        raise ValueError(f"prompt ids must be [T] or [B, T], got shape {tuple(ids.shape)}")
    if vocab_size is not None and bool(((ids < 0) | (ids >= vocab_size)).any()):
        bad = ids[(ids < 0) | (ids >= vocab_size)][0]
        raise ValueError(f"prompt token {int(bad)} is outside the model's vocabulary [0, {vocab_size})")
    return ids.long()


def check_budget(prompt_len: int, max_new_tokens, limit: int) -> int:
    """max_new_tokens as a checked int: an integer >= 0 with prompt_len + max_new_tokens <= limit
    (the model's max_position_embeddings)."""
    max_new_tokens = as_int(max_new_tokens, "max_new_tokens")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if prompt_len + max_new_tokens > limit:
        raise ValueError(
            f"prompt ({prompt_len} tokens) + max_new_tokens ({max_new_tokens}) exceeds the model's "
            f"max_position_embeddings ({limit})"
        )
    return max_new_tokens


@torch.inference_mode()
def generate(
    model: Transformer,
    ids: torch.Tensor | Sequence[int],
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """Plain decoding, one target forward per token. ids [B, T] (or [T], a list) -> new tokens [B, n],
    n <= max_new_tokens.

    Stops early once every row has produced an EOS token (`eos_token_id`: an int, a list, a numpy
    integer or an integer tensor); rows that finished first are padded with their EOS token.
    Refuses float ids, an empty prompt and T + max_new_tokens past max_position_embeddings.
    Greedy output is what the speculative loops reproduce token for token: exactly in fp32; in bf16 a
    near-tie between two logits may flip, since a verify pass batches the same tokens differently.
    """
    sampling = SamplingParams(temperature, top_k, top_p, generator)
    ids = prompt_tensor(ids, model.cfg.vocab_size).to(model.device)
    B, T = ids.shape
    max_new_tokens = check_budget(T, max_new_tokens, model.cfg.max_position_embeddings)
    if max_new_tokens == 0:
        return ids.new_empty(B, 0)
    cache = model.new_cache(batch_size=B, max_len=T + max_new_tokens)
    eos = torch.tensor(eos_token_ids(eos_token_id, model.cfg.vocab_size), dtype=torch.long, device=ids.device)
    out = ids.new_empty(B, max_new_tokens)
    done = torch.zeros(B, dtype=torch.bool, device=ids.device)
    logits = model(ids, cache=cache)[:, -1]
    for step in range(max_new_tokens):
        token = sample_next(logits, sampling)
        if len(eos):
            token = torch.where(done, out[:, step - 1] if step else token, token)
            done |= torch.isin(token, eos)
        out[:, step] = token
        if step + 1 == max_new_tokens or (len(eos) and bool(done.all())):
            return out[:, : step + 1]
        logits = model(token[:, None], cache=cache)[:, -1]
    return out
