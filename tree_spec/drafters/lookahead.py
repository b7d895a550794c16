"""Lookahead decoding: Jacobi iteration guesses future tokens, an n-gram pool remembers what it found.

Jacobi iteration treats the next W tokens as unknowns x_1..x_W, starts from a guess, and updates all of
them at once: feed [root, x_1..x_W] through the target, and x_{j+1} <- the target's argmax after x_j.
Every prefix of guesses the target agrees with is exact greedy output, so the guess window is simply a
draft chain: verifying it IS the Jacobi step, and the target's predictions at its nodes are the next
guesses. Guesses that are wrong now still converge into plausible n-grams over the iterations; the pool
keeps them keyed by their first token, and whenever the root equals a key, the pool's continuations are
drafted as extra branches. All candidates are merged into one trie below the root and verified in ONE
target forward (tree mask), so greedy output is exactly plain greedy (Fu et al. 2024, "Break the
Sequential Dependency of LLM Inference Using Lookahead Decoding"; they keep W × (N − 1) levels of the
window in the forward pass, this minimal version keeps the levels from earlier iterations instead).

No draft model, no training: the drafter learns only from the target's own verify passes, through
`observe_verify`, the verb every drafter has (a no-op for the others).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import NoReturn

import torch

from ..core.accept import accepted_path, host_argmax
from ..core.contracts import Branching, DraftRequest, DraftTree, DynamicShape, TargetFeatures


class LookaheadDrafter:
    """Jacobi guess window (`window` tokens) + n-gram pool (continuations of `ngram` − 1 tokens, at most
    `pool_per_key` per first token, newest first); `candidates` pool branches per step. A `Proposer` that drafts
    a whole trie per step and ignores the shape a loop asks for (only its depth limit)."""

    feature_layers = None

    def __init__(self, vocab_size: int, window: int = 3, ngram: int = 3, candidates: int = 2,
                 pool_per_key: int = 4, device: torch.device | str = "cpu") -> None:
        self.calls = 0
        if window < 1 or ngram < 2 or candidates < 0 or pool_per_key < 1:
            raise ValueError(f"need window >= 1, ngram >= 2, candidates >= 0, pool_per_key >= 1; got "
                             f"{window}, {ngram}, {candidates}, {pool_per_key}")
        self.vocab_size, self.device = vocab_size, torch.device(device)
        self.window, self.ngram, self.candidates, self.pool_per_key = window, ngram, candidates, pool_per_key
        self.reset(0)

    def __repr__(self) -> str:
        return f"LookaheadDrafter(window {self.window}, {self.ngram}-grams, {self.candidates} candidates)"

    def reset(self, max_len: int) -> None:
        self.guesses: list[int] = []  # Jacobi guesses for the tokens after the next root
        self.pool: dict[int, list[tuple[int, ...]]] = defaultdict(list)
        self._chain: list[int] = []  # node ids of the guess chain in the last proposed trie

    def limits(self, shape: Branching | DynamicShape) -> tuple[int, int]:
        """(most draft nodes, most levels) of one trie, whatever the shape asked for: the guess window and
        `candidates` pool continuations of `ngram` - 1 tokens."""
        return self.window + self.candidates * (self.ngram - 1), max(self.window, self.ngram - 1)

    def batched(self) -> NoReturn:
        """Refused: the batched loop verifies chains, and lookahead proposes whole tries and learns from every
        verify pass."""
        raise TypeError("LookaheadDrafter has no batched form: it proposes whole tries and learns from every verify "
                        "pass, and the batched loop verifies chains: decode with lookahead_generate")

    def propose(self, request: DraftRequest) -> DraftTree:
        """The trie of [guess window] + pool continuations of the root, at most `request.max_depth` deep (greedy
        decoding only: a trie of guesses has no draft distribution to verify a sample against)."""
        if not request.sampling.greedy:
            raise ValueError("LookaheadDrafter drafts for greedy decoding only (sampling=GREEDY): its guesses come "
                             "with no draft distribution, which lossless sampled verification needs")
        context, root, max_depth = request.context, request.root, request.max_depth
        self.calls += 1
        guesses = self._extend(self.guesses, int(root), context)[: min(self.window, max_depth)]
        tokens, parents, children = [int(root)], [-1], [{}]
        chains = []
        for sequence in [guesses, *self.pool.get(int(root), [])[: self.candidates]]:
            node, chain = 0, []
            for token in sequence[:max_depth]:
                if token not in children[node]:
                    children[node][token] = len(tokens)
                    tokens.append(token)
                    parents.append(node)
                    children.append({})
                node = children[node][token]
                chain.append(node)
            chains.append(chain)
        self._chain = chains[0]
        return DraftTree(tokens, parents)

    def observe(self, features: TargetFeatures) -> None:
        """Reads no features."""

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """Jacobi update and n-gram harvest from the verify pass of the last proposed trie.

        target_logits [n, V]: one row per node. The target's argmax after guess j is the new guess for the
        position after it; each fed guess plus the updated guesses after it is an n-gram for the pool.
        """
        if not self._chain:
            return
        predicted = host_argmax(target_logits)
        window = [predicted[0]] + [predicted[i] for i in self._chain]  # guesses for root+1, root+2, ...
        for j, node in enumerate(self._chain):
            continuation = tuple(window[j + 1: j + self.ngram])
            if len(continuation) == self.ngram - 1:
                self._remember(tokens[node], continuation)
        n_accepted = len(accepted_path(tokens, parents, predicted)) - 1
        self.guesses = window[n_accepted + 1:]  # the next root is the target's token after the accepted drafts
        self._chain = []

    def _extend(self, guesses: list[int], root: int, context: Sequence[int]) -> list[int]:
        """Top the window up to `window` guesses: continue the last one from the pool, else from the context."""
        guesses = list(guesses)
        fill = _fill(context, self.window)
        while len(guesses) < self.window:
            known = self.pool.get(guesses[-1] if guesses else root)
            guesses += known[0] if known else fill[len(guesses):len(guesses) + 1]
        return guesses

    def _remember(self, key: int, continuation: tuple[int, ...]) -> None:
        entries = self.pool[key]
        if continuation in entries:
            entries.remove(continuation)
        entries.insert(0, continuation)
        del entries[self.pool_per_key:]


def _fill(context: Sequence[int], n: int) -> list[int]:
    """n initial guesses: tokens spread over the context (the paper starts from random prompt tokens)."""
    return [int(context[(i * 7919) % len(context)]) for i in range(n)] if context else [0] * n
