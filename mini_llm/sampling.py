"""How logits become tokens: `SamplingParams` (temperature, top-k, top-p, the generator), written once for every
loop of both packages (`generate`, the batched and fixed-shape decoders, tree_spec's speculative loops)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """temperature (0: greedy), top_k / top_p truncation (None: off), and the generator every draw uses."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [..., V] -> the sampling distribution [..., V] (fp32) after temperature, top-k and top-p.

        top-k keeps the k most likely tokens; top-p keeps the smallest set of most likely tokens whose mass reaches
        p (always at least one). Everything else gets probability exactly 0. Not for greedy parameters.
        """
        if self.greedy:
            raise ValueError("temperature must be > 0 for sampling (temperature 0 is greedy: take the argmax)")
        logits = logits.float() / self.temperature
        if self.top_k is not None:
            kth = torch.topk(logits, min(self.top_k, logits.shape[-1]), dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if self.top_p is not None:
            sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
            mass_before = sorted_probs.cumsum(-1) - sorted_probs
            sorted_probs = sorted_probs.masked_fill(mass_before >= self.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs


GREEDY = SamplingParams()


def logits_to_probs(
    logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """logits [..., V] -> the sampling distribution [..., V] (fp32): `SamplingParams(temperature, top_k,
    top_p).probs(logits)`, for callers that hold the three numbers."""
    return SamplingParams(temperature, top_k, top_p).probs(logits)


def sample_next(logits: torch.Tensor, sampling: SamplingParams = GREEDY) -> torch.Tensor:
    """logits [B, V] -> next token ids [B]: the argmax when greedy, else a draw from `sampling.probs(logits)` with
    `sampling.generator`."""
    if sampling.greedy:
        return logits.argmax(-1)
    return torch.multinomial(sampling.probs(logits), 1, generator=sampling.generator).squeeze(-1)
