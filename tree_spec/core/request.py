"""Request validation, written once for every loop: prompts, the token budget, EOS ids and the drafter's vocabulary."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mini_llm import Config, Transformer
from mini_llm.batch import _token_lists
from mini_llm.generate import check_budget, eos_token_ids, prompt_tensor

from .contracts import SamplingParams


@dataclass(frozen=True)
class Request:
    """A validated generation request: prompts [B][T_b] (one row for the single-sequence loops), the budget of new
    tokens per row, and the EOS token ids."""

    prompts: list[list[int]]
    max_new_tokens: int
    eos: frozenset[int]

    @property
    def prompt(self) -> list[int]:
        """The prompt of a single-sequence request."""
        return self.prompts[0]


def prompt_list(prompt_ids: Sequence[int] | torch.Tensor, vocab_size: int | None = None) -> list[int]:
    """list[int] or integer LongTensor [T] / [1, T] -> list[int] (non-empty); float ids, and ids outside
    [0, vocab_size) when it is given, are refused."""
    ids = prompt_tensor(prompt_ids, vocab_size)
    if ids.shape[0] != 1:
        raise ValueError(f"prompt_ids must be [T] or [1, T] (batch size 1), got shape {tuple(ids.shape)}")
    return ids[0].tolist()


def check_arguments(target: object, sampling: object) -> None:
    """TypeError naming the argument unless `target` is a mini_llm Transformer and `sampling` a SamplingParams."""
    if not isinstance(target, Transformer):
        raise TypeError(f"target must be a mini_llm Transformer (e.g. load_model(\"tiny-qwen3\")), got "
                        f"{type(target).__name__}")
    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be a SamplingParams (e.g. SamplingParams(temperature=1.0); greedy is the "
                        f"default), got {sampling!r}")


def validate_request(
    cfg: Config,
    drafter_vocab: int,
    prompt_ids: Sequence[int] | torch.Tensor | None,
    max_new_tokens: int,
    eos_token_id: int | Sequence[int] | torch.Tensor | None,
    prompts: Sequence[Sequence[int]] | None = None,
) -> Request:
    """Check a request against the target's config `cfg` -> Request; ValueError naming the problem.

    Pass `prompt_ids` (one sequence: list[int] or LongTensor [T] / [1, T]) or `prompts` (a batch of token lists).
    """
    if drafter_vocab != cfg.vocab_size:
        raise ValueError(f"drafter vocabulary ({drafter_vocab}) != target vocabulary ({cfg.vocab_size})")
    rows = [prompt_list(prompt_ids, cfg.vocab_size)] if prompts is None else _token_lists(prompts, cfg.vocab_size)
    longest = max(map(len, rows))
    max_new_tokens = check_budget(longest, max_new_tokens, cfg.max_position_embeddings)
    return Request(rows, max_new_tokens, frozenset(eos_token_ids(eos_token_id, cfg.vocab_size)))
