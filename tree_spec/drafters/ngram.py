"""Prompt lookup / n-gram drafting: no model, no training — copy what followed the same recent tokens.

For each frontier node the drafter takes the sequence context + root..node, finds the longest suffix
(at most `max_ngram`, at least `min_ngram` tokens) that also occurs earlier in it, and proposes the
tokens that followed those earlier occurrences, most frequent first (ties: most recent first).
So a chain copies the latest match, and a tree's top-w children are the w most common continuations.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import torch

from .base import Drafter


def ngram_continuations(seq: Sequence[int], max_ngram: int = 4, min_ngram: int = 1) -> tuple[int, list[int]]:
    """(n, followers): the longest suffix length n in [min_ngram, max_ngram] that occurred earlier in
    `seq`, and the token after each earlier occurrence, most recent first. (0, []) when none matches."""
    seq = list(seq)
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        suffix = seq[-n:]
        followers = [seq[i + n] for i in range(len(seq) - n - 1, -1, -1) if seq[i:i + n] == suffix]
        if followers:
            return n, followers
    return 0, []


class NGramDrafter(Drafter):
    """Prompt lookup as a Drafter: a row's logits are log(count) for the continuations found, `FLOOR` elsewhere.

    The scores rank candidates (greedy trees take the top-w). Under sampling they define a proper draft
    distribution over the continuations only: `FLOOR` is low enough that no temperature moves draft mass onto
    a token the text never continued with (a softmax gives it exactly 0 at any temperature up to ~90).
    So a lone continuation is a deterministic draft, q = 1, accepted with the target's own probability p(x),
    as vLLM's prompt lookup treats its drafts, and the lossless verifiers apply unchanged. With no match the
    row is flat: the proposal is arbitrary (it costs a verify slot, never correctness).
    """

    FLOOR = -1e4  # logit of a token that is not a continuation (finite: greedy scores stay free of inf / nan)

    def __init__(self, vocab_size: int, max_ngram: int = 4, min_ngram: int = 1, window: int = 1024,
                 device: torch.device | str = "cpu") -> None:
        super().__init__(vocab_size, device)
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram, self.window = max_ngram, min_ngram, window

    def __repr__(self) -> str:
        return f"NGramDrafter(ngram {self.min_ngram}..{self.max_ngram})"

    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        self.calls += 1
        recent = list(context[-self.window:])
        logits = torch.zeros(len(frontier), self.vocab_size, device="cpu")  # filled on the CPU, moved once
        for row, node in enumerate(frontier):
            path = []
            while node >= 0:
                path.append(tokens[node])
                node = parents[node]
            _, followers = ngram_continuations(recent + path[::-1], self.max_ngram, self.min_ngram)
            counts = Counter(followers)  # insertion order = most recent first, kept by most_common on ties
            if counts:
                logits[row] = self.FLOOR
            for rank, (token, count) in enumerate(counts.most_common()):
                logits[row, token] = math.log(count) - 1e-3 * rank
        return logits.to(self.device)
