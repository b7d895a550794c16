"""Proposers made of the learner's drafting functions (exercises 11, 12, 13, 15), for the capstone's loop.

Each is a package `Proposer` (docs/ARCHITECTURE.md) around a level-wise drafter and calls the piece through
`Pieces.call`, so that an exception or a malformed tree names the piece (at the new token the request's context
gives: `Pieces.locate`). A `Shadow` compares every drafted tree with the exercise's solution on the same inputs
(greedy output stays identical whatever the drafts, so this is how a wrong drafter shows).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from tree_spec import DraftTree
from tree_spec.core.contracts import DraftRequest, TargetFeatures
from tree_spec.drafters.base import Drafter

from .capstone_loop import Pieces, Shadow, check_tree
from .values import TYPE_POLICY, as_ints, kind


class _Base:
    """The Proposer members shared by the capstone's proposers: `drafter` (a level-wise `Drafter`) does the work."""

    key = ""

    def __init__(self, pieces: Pieces, shadow: Shadow, drafter: Any = None) -> None:
        self.pieces, self.shadow, self.drafter = pieces, shadow, drafter
        self.calls = 0
        self.feature_layers = getattr(drafter, "feature_layers", None)
        if drafter is not None:
            self.vocab_size, self.device = drafter.vocab_size, drafter.device

    def reset(self, max_len: int) -> None:
        if self.drafter is not None:
            self.drafter.reset(max_len)

    def observe(self, features: TargetFeatures) -> None:
        self.drafter.observe(features)

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """Not used by these drafters."""

    def _tree(self, request: DraftRequest, args: Callable[[], tuple[Any, ...]]) -> DraftTree:
        """Call the piece on args(), check the tree, shadow it with the reference on fresh args() -> DraftTree."""
        self.calls += 1
        self.pieces.locate(len(request.context))
        out = self.pieces.call(self.key, *args())
        tree = check_tree(out, request.root, request.max_depth, self.vocab_size)
        if isinstance(tree, str):
            raise self.pieces.fail(self.key, tree)
        self.shadow.compare((tree.tokens, tree.parents), self.pieces.where, args)
        return tree


class NGramProposer(_Base):
    """Prompt lookup with piece 12: the longest n in `ngrams` (4, 3, 2, 1) whose suffix matched, k drafts."""

    key = "12"

    def __init__(self, pieces: Pieces, shadow: Shadow, vocab_size: int, k: int = 5,
                 ngrams: Sequence[int] = (4, 3, 2, 1)) -> None:
        super().__init__(pieces, shadow)
        self.vocab_size, self.device = vocab_size, torch.device("cpu")
        self.k, self.ngrams = k, tuple(ngrams)

    def observe(self, features: TargetFeatures) -> None:
        """Reads no features."""

    def propose(self, request: DraftRequest) -> DraftTree:
        seq, k = [*request.context, request.root], min(self.k, request.max_depth)
        self.calls += 1
        self.pieces.locate(len(request.context))
        drafts: list[int] = []
        for n in self.ngrams:
            out = self.pieces.call(self.key, list(seq), n, k)
            drafts = as_ints(out)
            if drafts is None or len(drafts) > k or not all(0 <= t < self.vocab_size for t in drafts):
                raise self.pieces.fail(self.key, f"returned {out!r:.80} ({kind(out)}) for n = {n}, k = {k}: need a "
                                                 f"list of at most k token ids in [0, {self.vocab_size}) ({TYPE_POLICY})")
            self.shadow.compare(drafts, f"{self.pieces.where} (n = {n})", lambda: (list(seq), n, k))
            if drafts:
                break
        return DraftTree([request.root, *drafts], list(range(-1, len(drafts))))


class TreeProposer(_Base):
    """Piece 11: a fixed-branching tree from `drafter`, one call per level (cut to the depth the loop allows)."""

    key = "11"

    def __init__(self, pieces: Pieces, shadow: Shadow, drafter: Any, branching: Sequence[int]) -> None:
        super().__init__(pieces, shadow, drafter)
        self.branching = list(branching)

    def propose(self, request: DraftRequest) -> DraftTree:
        return self._tree(request, lambda: (self.drafter, list(request.context), request.root,
                                            self.branching[:request.max_depth]))


class ConfidentProposer(_Base):
    """Piece 15: a chain of at most k drafts that stops once the draft's path probability falls below theta."""

    key = "15"

    def __init__(self, pieces: Pieces, shadow: Shadow, drafter: Any, k: int, theta: float) -> None:
        super().__init__(pieces, shadow, drafter)
        self.k, self.theta = k, theta

    def propose(self, request: DraftRequest) -> DraftTree:
        return self._tree(request, lambda: (self.drafter, list(request.context), request.root,
                                            min(self.k, request.max_depth), self.theta))


class LogProbs:
    """`next_logprobs(path)` for piece 13, backed by a level-wise drafter and batched per level.

    It mirrors the tree the expansion is building: when the piece asks for a node, that node's `top_k` most
    likely children join the mirror, and the first request at a new depth computes every pending node of that
    depth in ONE drafter call (the children of the nodes the piece expanded: top_k x top_k rows), as the
    package's `build_dynamic_tree` does per level. A path outside the mirror is computed on its own.
    """

    def __init__(self, drafter: Any, context: list[int], root: int, top_k: int) -> None:
        self.drafter, self.context, self.top_k = drafter, context, top_k
        self.tokens, self.parents, self.depth = [root], [-1], [0]
        self.node: dict[tuple[int, ...], int] = {(root,): 0}
        self.rows: dict[int, torch.Tensor] = {}

    def _add(self, path: tuple[int, ...]) -> int:
        if path not in self.node:
            parent = self._add(path[:-1])
            self.node[path] = len(self.tokens)
            self.tokens.append(path[-1])
            self.parents.append(parent)
            self.depth.append(self.depth[parent] + 1)
        return self.node[path]

    def __call__(self, path: list[int]) -> torch.Tensor:
        key = tuple(int(t) for t in path)
        if not key or key[0] != self.tokens[0]:
            raise ValueError(f"next_logprobs got the path {list(path)}; it must start with the root {self.tokens[0]}")
        node = self._add(key)
        if node not in self.rows:
            level = [m for m in range(len(self.tokens)) if self.depth[m] == self.depth[node] and m not in self.rows]
            logits = self.drafter.next_logits(self.context, self.tokens, self.parents, level)
            logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
            self.rows.update(zip(level, logprobs))
        row = self.rows[node]
        for token in torch.sort(row, descending=True, stable=True).indices[:self.top_k].tolist():
            self._add(key + (token,))
        return row.clone()


class Eagle2Proposer(_Base):
    """Piece 13: an EAGLE-2 tree (expand by cumulative log-prob, rerank) over the drafter's log-probs."""

    key = "13"

    def __init__(self, pieces: Pieces, shadow: Shadow, drafter: Any, depth: int, top_k: int, total_tokens: int
                 ) -> None:
        super().__init__(pieces, shadow, drafter)
        self.depth, self.top_k, self.total_tokens = depth, top_k, total_tokens

    def propose(self, request: DraftRequest) -> DraftTree:
        oracle = LogProbs(self.drafter, list(request.context), request.root, self.top_k)
        return self._tree(request, lambda: (request.root, oracle, min(self.depth, request.max_depth), self.top_k,
                                            self.total_tokens))


class ReversedDraft(Drafter):
    """`drafter`'s top_k tokens with their logits in reverse order and sharpened (x `scale`): most of the draft's
    mass on the token `drafter` finds least likely of them, a draft far from the target, so that under sampling
    the rejections and residuals of piece 07 decide most tokens."""

    def __init__(self, drafter: Drafter, top_k: int, scale: float = 4.0) -> None:
        super().__init__(drafter.vocab_size, drafter.device)
        self.drafter, self.top_k, self.scale = drafter, top_k, scale

    def reset(self, max_len: int) -> None:
        self.drafter.reset(max_len)

    def next_logits(self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int],
                    frontier: Sequence[int]) -> torch.Tensor:
        logits = self.drafter.next_logits(context, tokens, parents, frontier)
        top = logits.topk(self.top_k, dim=-1)
        return torch.full_like(logits, float("-inf")).scatter_(-1, top.indices, self.scale * top.values.flip(-1))
