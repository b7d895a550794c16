"""Chain speculative decoding: draft k tokens, verify them in one causal target forward, roll back by truncate."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer

from ..core.contracts import GREEDY, NO_TRACE, Branching, Proposer, SamplingParams, Trace, check_k
from ..core.output import SpecOutput
from .loop import speculate


@torch.inference_mode()
def speculative_generate(
    target: Transformer, drafter: Proposer | Transformer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    k: int = 4,
    sampling: SamplingParams = GREEDY, eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    min_path_prob: float = 0.0,
    trace: Trace = NO_TRACE,
) -> SpecOutput:
    """Each step: the drafter proposes k tokens, the target scores [root, d_1..d_k] in one forward.

    Greedy (the default `sampling`) keeps the drafts up to the first disagreement and appends the target's
    own token there (the bonus token if all k agree): exactly `generate(target, prompt, n)`.
    Sampling uses `verify_chain` (min(1, target/draft) acceptance, residual on rejection).
    The cache keeps root + accepted drafts: `truncate(start + 1 + n_accepted)`.
    min_path_prob > 0 stops a chain early, before k, once the product of its drafts' draft probabilities falls
    below it (`build_draft_tree`); pair it with a larger k.
    prompt_ids: list[int] or LongTensor [1, T]. Returns SpecOutput with the new tokens only.
    Greedy identity is exact in fp32; in bf16 a near-tie between two logits may flip (the verify pass
    and plain decoding batch the same tokens differently, so their roundings differ).
    """
    chain = Branching((1,) * check_k(k), min_path_prob)
    return speculate(target, drafter, prompt_ids, max_new_tokens, chain, sampling, eos_token_id, trace)
