"""Tree speculative decoding with a fixed branching shape: draft a tree level by level, verify it in ONE pass."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer

from ..core.contracts import GREEDY, NO_TRACE, Branching, Proposer, SamplingParams, Trace
from ..core.output import SpecOutput
from .loop import speculate


@torch.inference_mode()
def tree_speculative_generate(
    target: Transformer, drafter: Proposer | Transformer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    branching: Sequence[int] = (2, 2, 1, 1),
    sampling: SamplingParams = GREEDY, eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    min_path_prob: float = 0.0,
    trace: Trace = NO_TRACE,
) -> SpecOutput:
    """Tree speculative decoding: draft a tree with `branching`, verify it in one target forward.

    Greedy (the default `sampling`) reproduces `generate(target, prompt, max_new_tokens)` token for token;
    sampling accepts with `verify_tree` (lossless: the output follows the target's distribution).
    min_path_prob > 0: nodes whose draft path probability falls below it get no children (EAGLE-2's rule).
    prompt_ids: list[int] or LongTensor [1, T]. Returns SpecOutput with the new tokens only.
    Greedy identity is exact in fp32; in bf16 a near-tie between two logits may flip (the tree pass
    and plain decoding batch the same tokens differently, so their roundings differ).
    """
    shape = Branching.of(branching, min_path_prob)
    return speculate(target, drafter, prompt_ids, max_new_tokens, shape, sampling, eos_token_id, trace)
