"""Chain speculative decoding in fixed shapes (`FixedShapeLoop`): k drafts and a verify pass over k + 1 tokens
every step. Greedy output equals `generate` (exactly in fp32); sampling is lossless (`chain_rejection`, the rule
`verify_chain` applies), with draws made on the device. Drafters: a separate small model or the quantized self
(`ModelDrafter`), and the recurrent heads (`HeadDrafter`: EAGLE-1, EAGLE-3 style, MTP).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer

from ..core.accept import accept_chain_greedy
from ..core.contracts import GREEDY, Proposer, SamplingParams, check_k
from ..core.output import SpecOutput
from ..core.request import validate_request
from ..core.sampling import chain_rejection
from ..decoding.loop import target_forward
from ..drafters.model import as_drafter
from .drafters import fixed_shape_drafter
from .loop import FixedShapeLoop


class FixedShapeChain(FixedShapeLoop):
    """Chain speculative decoding (k drafts per step) in fixed shapes: see `FixedShapeLoop`."""

    def __init__(
        self,
        target: Transformer,
        drafter: Proposer | Transformer,
        max_len: int,
        k: int = 4,
        sampling: SamplingParams = GREEDY,
        graphs: bool | None = None,
    ) -> None:
        self.k = check_k(k)
        super().__init__(target, max_len, sampling, graphs)
        self.drafter = fixed_shape_drafter(drafter, max_len + 1, sampling)
        self.room, self.draft_calls_per_step = self.k + 1, self.k  # k head or draft-model calls per step

    def _drafted(self, room: int) -> tuple[int, int]:
        return min(self.k, room - 1), min(self.k, room - 1)

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root [] -> (next root [], [n, then the k + 1 emitted tokens: n drafts, the target's token, filler])."""
        drafts, draft_probs = self.drafter.draft(root, self.k)  # [k], [k, V] or None
        chain = torch.cat((root[None], drafts))
        start = self.cache.length.clone()
        logits, feats = target_forward(self.target, self.drafter, chain[None], self.cache)  # [k + 1, V]
        if self.sampling.greedy:
            n, next_token = accept_chain_greedy(drafts, logits)
        else:
            n, next_token = chain_rejection(drafts, draft_probs, self.sampling.probs(logits), self.sampling.generator)
        self.cache.truncate(start + 1 + n)
        self.drafter.commit(chain, next_token, n, feats)
        emitted = torch.cat((drafts, next_token[None])).scatter(0, n[None], next_token[None])
        return next_token, torch.cat((n[None], emitted))


def fixed_shape_speculative_generate(
    target: Transformer, drafter: Proposer | Transformer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    k: int = 4,
    sampling: SamplingParams = GREEDY, eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    graphs: bool | None = None,
) -> SpecOutput:
    """`speculative_generate`'s chain in fixed shapes, one request through a fresh `FixedShapeChain` sized for it
    (it captures its graph for this request only; keep a FixedShapeChain to serve many).

    Returns SpecOutput with the new tokens only: greedy equals `generate(target, prompt, max_new_tokens)`
    token for token (exactly in fp32).
    """
    drafter = as_drafter(drafter)
    request = validate_request(target.cfg, drafter.vocab_size, prompt_ids, max_new_tokens, eos_token_id)
    max_len = len(request.prompt) + request.max_new_tokens + check_k(k) + 2
    return FixedShapeChain(target, drafter, max_len, k, sampling, graphs).run(request)
