"""Tree speculative decoding with EAGLE-2 dynamic trees (`core.growth.build_dynamic_tree`)."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer
from mini_llm.generate import as_int

from ..core.contracts import GREEDY, NO_TRACE, DynamicShape, Proposer, SamplingParams, Trace
from ..core.output import SpecOutput
from .loop import speculate


@torch.inference_mode()
def dynamic_tree_speculative_generate(
    target: Transformer, drafter: Proposer | Transformer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    depth: int = 5, width: int = 4, total_tokens: int = 24, min_path_prob: float = 0.0,
    sampling: SamplingParams = GREEDY, eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    trace: Trace = NO_TRACE,
) -> SpecOutput:
    """Tree speculative decoding with EAGLE-2 dynamic trees (any drafter; EAGLE heads in the paper): `depth`
    levels, the `width` best nodes of each level expanded into `width` children, `total_tokens` nodes kept.
    min_path_prob > 0 stops a step's expansion early once the nodes it would expand next have a summed path
    probability below it (Dynamic Depth Decoding's rule; `DynamicShape`); it reads only the draft's scores, so
    greedy output and the sampled law are unchanged.

    Greedy reproduces `generate(target, prompt, max_new_tokens)` (exactly in fp32; in bf16 a near-tie
    between two logits may flip); sampling is lossless (`verify_tree`).
    """
    shape = DynamicShape(as_int(depth, "depth"), as_int(width, "width"), as_int(total_tokens, "total_tokens"),
                         float(min_path_prob))
    return speculate(target, drafter, prompt_ids, max_new_tokens, shape, sampling, eos_token_id, trace)
