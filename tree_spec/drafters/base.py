"""`Drafter`: the base class of the level-wise draft sources, a `Proposer` (core.contracts) for free.

A level-wise drafter answers one question: given the committed context and the tree drafted so far, what
are its next-token logits after each frontier node? `propose` grows the tree a loop asks for with it (a
fixed branching, a chain = branching [1] * k, or an EAGLE-2 dynamic tree), so every loop takes any drafter.
Feature-level drafters (Medusa, EAGLE, MTP) answer the same question from the target's hidden states: a
drafter that sets `feature_layers` (not None) gets, through `observe`, the target's features of every
committed token, in order: all prompt rows after the prefill, then after each verify pass the rows of the
accepted path (root first). So before each `next_logits` call it has seen exactly one feature row per
context token.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch

from mini_llm.generate import as_int

from ..core.contracts import DraftRequest, DraftTree, TargetFeatures
from ..core.growth import default_next_top, grow


class Drafter(ABC):
    """Base of the level-wise draft sources: a `Proposer` once `__init__` has run.

    vocab_size: the vocabulary its logits cover (must equal the target's); device: where its logits live; `calls`
    counts its forward passes (SpecOutput.draft_calls). Every subclass calls `super().__init__(vocab_size, device)`
    (a loop refuses a drafter that lacks these members, naming them).
    feature_layers: None for drafters that read tokens only; a tuple of target layer indices (empty for the last
    hidden state only) for feature-level drafters, which then receive `observe(features)` calls from the loop.
    fixed_shape_twin: the fixed-shape drafter that drafts as it does (see `Proposer`); None: none.
    """

    feature_layers: tuple[int, ...] | None = None
    fixed_shape_twin: str | None = None

    def __init__(self, vocab_size: int, device: torch.device | str) -> None:
        self.vocab_size, self.device = as_int(vocab_size, "vocab_size"), torch.device(device)
        self.calls = 0

    def reset(self, max_len: int) -> None:
        """Start a new sequence; context plus drafted nodes will not exceed `max_len` tokens (default: keeps no
        state between sequences)."""

    def observe(self, features: TargetFeatures) -> None:
        """Take the target's features of the next committed tokens (only if `feature_layers` is set)."""

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """See every verify pass: the tree fed (node 0 = root) and the target's logits [n, V] at each node.

        A no-op for most drafters; lookahead decoding takes its Jacobi updates from it.
        """

    def propose(self, request: DraftRequest) -> DraftTree:
        """The tree `request` asks for, grown level by level with `next_logits` (drafters that draft a whole tree
        at once, like lookahead decoding, override this)."""
        return grow(self, request)

    @abstractmethod
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        """Draft logits [len(frontier), V] after each frontier node.

        context: the committed tokens before the root; (tokens, parents): the tree so far, whose
        node 0 is the root (the last token the target gave); frontier: leaves of that tree.
        """

    def next_top(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int],
        width: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The `width` most likely children after each frontier node: token ids [len(frontier), w] and their draft
        log-probabilities [len(frontier), w], best first (`top_children` of `next_logits`). Greedy tree growth
        asks this; a drafter that can pick them more cheaply (over a reduced vocabulary) overrides it."""
        return default_next_top(self, context, tokens, parents, frontier, width)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
