"""Drafters the judge hands to a learner's function besides the package's own: each is a real `tree_spec.Drafter`
(vocab_size, device, calls, feature_layers, fixed_shape_twin, reset, observe, observe_verify, propose, next_logits,
next_top), so any documented member a solution uses works as it does on the package's drafters
(tests/test_judge_drafters.py calls every one). references.py hashes this file with each cases.py.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from tree_spec.core.topology import depths
from tree_spec.drafters.base import Drafter


class ExactDrafter(Drafter):
    """A table drafter whose rows give probability exactly 0.5 to two tokens (chosen by the node's depth) and 0 to
    the others, so path probabilities are exact powers of 1/2 and `q == theta` can be graded exactly (exercise 15
    and the capstone's confident-chain check). Its log-probs, log(0.5) in float32, are not exact: exp() of them in
    float64 is 0.5 - 9.5e-10, which is why a path probability is the product of probabilities (softmax), not the
    exp of a float32 sum of log-probs."""

    VOCAB = 16

    def __init__(self) -> None:
        super().__init__(self.VOCAB, "cpu")

    @classmethod
    def tied(cls, depth: int) -> tuple[int, int]:
        """The two tokens a node at `depth` gives probability 0.5 each: its children at depth + 1."""
        return (5 * depth + 3) % cls.VOCAB, (5 * depth + 11) % cls.VOCAB

    def next_logits(self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int],
                    frontier: Sequence[int]) -> torch.Tensor:
        self.calls += 1
        rows = torch.full((len(frontier), self.VOCAB), float("-inf"))
        depth = depths(list(parents))
        for row, node in enumerate(frontier):
            rows[row, list(self.tied(depth[node]))] = 0.0
        return rows
