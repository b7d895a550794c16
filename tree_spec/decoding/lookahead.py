"""Greedy lookahead decoding (Fu et al. 2024): the guess window and the n-gram pool verified as one trie."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer

from ..core.contracts import NO_TRACE, Branching, Proposer, Trace
from ..core.output import SpecOutput
from ..drafters.lookahead import LookaheadDrafter
from .loop import speculate


@torch.inference_mode()
def lookahead_generate(
    target: Transformer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    window: int = 3, ngram: int = 3, candidates: int = 2,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    drafter: Proposer | None = None,
    trace: Trace = NO_TRACE,
) -> SpecOutput:
    """Greedy lookahead decoding: each step verifies the guess window and the pool's continuations of the
    root as one trie, in one target forward; the output equals `generate(target, prompt, n)` token for token.
    drafter: a LookaheadDrafter with its own settings (or any proposer drafting at most `window` levels deep)."""
    drafter = drafter or LookaheadDrafter(target.cfg.vocab_size, window, ngram, candidates, device=target.device)
    shape = Branching((1,) * window)  # the depth a step may draft; a LookaheadDrafter's trie declares its own limits
    return speculate(target, drafter, prompt_ids, max_new_tokens, shape, eos_token_id=eos_token_id, trace=trace)
