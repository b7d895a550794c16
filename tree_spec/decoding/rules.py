"""The rules one verify pass applies, as one overridable class: `VerifyRules`, the package's rules by default.

`verify` (decoding.loop) calls, per pass: `layout` (positions and mask of the tree), `forward` (the one target
pass), `accept` (greedy) or `sample` (lossless sampling), and `keep` (the cache rollback). A subclass replaces some
of them (the practice capstone plugs in a learner's functions) and keeps the loop around them: request
validation, proposal checks, features, `observe_verify`, the EOS cut. `PACKAGE_RULES` is the default instance.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import torch

from mini_llm import KVCache, Transformer

from ..core.accept import accepted_path, host_argmax
from ..core.contracts import DraftTree, Proposer, TargetFeatures
from ..core.sampling import verify_chain, verify_tree
from ..core.topology import depths, tree_mask


def target_forward(
    target: Transformer,
    drafter: Proposer,
    ids: torch.Tensor,
    cache: KVCache,
    positions: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, TargetFeatures | None]:
    """One target pass over ids [1, n] -> (logits [n, V], features of the n rows or None).

    Features come for free from the same pass, and only when the drafter asks for them
    (`drafter.feature_layers` is not None).
    """
    if drafter.feature_layers is None:
        return target(ids, cache=cache, positions=positions, mask=mask)[0], None
    layers = list(drafter.feature_layers)
    out = target(ids, cache=cache, positions=positions, mask=mask, return_hidden=True, hidden_layers=layers or None)
    feats = TargetFeatures(out[1][0], tuple(layer_out[0] for layer_out in out[2]) if layers else ())
    return out[0][0], feats


class TreeShape(NamedTuple):
    """depth [n] on the device, the ancestor mask [n, n] (None for a chain: causal), the depth below the root, and
    whether the tree is a chain."""

    depth: torch.Tensor
    mask: torch.Tensor | None
    max_depth: int
    chain: bool


@functools.lru_cache(maxsize=1024)
def tree_shape(parents: tuple[int, ...], device: torch.device) -> TreeShape:
    """A tree shape's tensors, validated and built once per shape and device (a loop's trees repeat their
    shapes: a fixed branching always, an EAGLE-2 tree often)."""
    depth = depths(parents)
    chain = all(p == i - 1 for i, p in enumerate(parents))
    mask = None if chain else tree_mask(parents, device)
    return TreeShape(torch.tensor(depth, device=device), mask, max(depth), chain)


class VerifyRules:
    """The package's rules of one verify pass; override a method to apply another rule (stateless: `__slots__`
    keeps the default instance immutable)."""

    __slots__ = ()

    def layout(self, parents: list[int], start: int, device: torch.device
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """-> (positions [n] | None, mask [n, n] bool | None) of the tree fed after `start` cached tokens;
        (None, None) feeds it as a causal chain. A chain goes causal; a tree gets start + depth and `tree_mask`,
        built once per shape (`tree_shape`)."""
        shape = tree_shape(tuple(parents), device)
        return (None, None) if shape.chain else (start + shape.depth, shape.mask)

    def forward(self, target: Transformer, drafter: Proposer, context: Sequence[int], tree: DraftTree,
                cache: KVCache, positions: torch.Tensor | None, mask: torch.Tensor | None
                ) -> tuple[torch.Tensor, TargetFeatures | None]:
        """The tree's n tokens in one pass over `cache` (which holds `context`, the tokens before the root)
        -> (logits [n, V], features of the n rows or None): `target_forward`."""
        return target_forward(target, drafter, torch.tensor([tree.tokens], device=target.device), cache, positions,
                              mask)

    def accept(self, tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> tuple[list[int], int]:
        """Greedy: target_logits [n, V] -> (accepted path of node ids from 0, the target's token after it):
        `accepted_path` on the argmax, read to the host once."""
        predicted = host_argmax(target_logits)
        path = accepted_path(tokens, parents, predicted)
        return path, predicted[path[-1]]

    def sample(self, tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None, chain: bool
               ) -> tuple[list[int], int]:
        """Lossless: target_probs [n, V] (the sampling law after every node) -> (accepted path, next token):
        `verify_chain` for a chain, `verify_tree` for a tree, every draw from `generator`."""
        n, device = len(tree.tokens), target_probs.device
        if chain:
            n_accepted, next_token = verify_chain(tree.tokens[1:], tree.draft_probs[: n - 1].to(device), target_probs,
                                                  generator)
            return list(range(n_accepted + 1)), next_token
        return verify_tree(tree.tokens, tree.parents, tree.draft_probs.to(device), target_probs, generator)

    def keep(self, cache: KVCache, start: int, path: list[int], chain: bool) -> None:
        """Keep the accepted path's K/V after the `start` committed slots: `truncate` for a chain (its path is a
        prefix), `compact` for a tree."""
        if chain:
            cache.truncate(start + len(path))
        else:
            cache.compact(start, path)


PACKAGE_RULES = VerifyRules()
