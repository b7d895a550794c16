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

from .drafters import Drafter


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
    """Prompt lookup as a Drafter: logits are `boost + log(count)` for continuations, 0 elsewhere.

    The scores only rank candidates (greedy trees take the top-w); under sampling they define a
    proper draft distribution, so the lossless verifiers apply unchanged. With no match the scores
    are flat and the proposal is arbitrary (it costs a verify slot, never correctness).
    """

    def __init__(self, vocab_size: int, max_ngram: int = 4, min_ngram: int = 1, boost: float = 12.0,
                 window: int = 1024, device: torch.device | str = "cpu") -> None:
        super().__init__()
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self._vocab_size = vocab_size
        self.max_ngram, self.min_ngram, self.boost, self.window = max_ngram, min_ngram, boost, window
        self._device = torch.device(device)

    def __repr__(self) -> str:
        return f"NGramDrafter(ngram {self.min_ngram}..{self.max_ngram})"

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def device(self) -> torch.device:
        return self._device

    def reset(self, max_len: int) -> None:
        pass

    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        self.calls += 1
        recent = list(context[-self.window:])
        logits = torch.zeros(len(frontier), self._vocab_size, device="cpu")  # filled on the CPU, moved once
        for row, node in enumerate(frontier):
            path = []
            while node >= 0:
                path.append(tokens[node])
                node = parents[node]
            _, followers = ngram_continuations(recent + path[::-1], self.max_ngram, self.min_ngram)
            counts = Counter(followers)  # insertion order = most recent first, kept by most_common on ties
            for rank, (token, count) in enumerate(counts.most_common()):
                logits[row, token] = self.boost + math.log(count) - 1e-3 * rank
        return logits.to(self._device)
