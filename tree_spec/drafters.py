"""Draft sources behind one small interface.

A drafter answers one question: given the committed context and the tree drafted so far, what are
its next-token logits after each frontier node? `build_draft_tree` grows trees level by level with
it, and a chain is the tree with branching [1] * k, so both generators take any drafter.
Feature-level drafters (Medusa, EAGLE, MTP) answer the same question from the target's hidden
states: a drafter that sets `feature_layers` (not None) gets, through `observe`, the target's
features of every committed token, in order: all prompt rows after the prefill, then after each
verify pass the rows of the accepted path (root first). So before each `next_logits` call it has
seen exactly one feature row per context token.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mini_llm import KVCache, Transformer, quantized_copy

from .topology import depths, tree_mask


@dataclass
class TargetFeatures:
    """What a verify pass hands a feature-level drafter, one row per token it fed.

    hidden [n, C]: the target's final-norm input; layers: the outputs [n, C] of the decoder layers
    listed in the drafter's `feature_layers`, in that order (empty when it lists none).
    """

    hidden: torch.Tensor
    layers: tuple[torch.Tensor, ...] = ()

    def rows(self, index: Sequence[int]) -> "TargetFeatures":
        """The rows `index` (e.g. an accepted tree path, in path order) of every tensor."""
        idx = torch.as_tensor(list(index), dtype=torch.long, device=self.hidden.device)
        return TargetFeatures(self.hidden[idx], tuple(x[idx] for x in self.layers))


class Drafter(ABC):
    """Interface of every draft source. `calls` counts its forward passes (SpecOutput.draft_calls).

    feature_layers: None for drafters that read tokens only; a tuple of target layer indices
    (empty for the last hidden state only) for feature-level drafters, which then receive
    `observe(features)` calls from the generation loop.
    """

    feature_layers: tuple[int, ...] | None = None

    def __init__(self) -> None:
        self.calls = 0

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Size of the vocabulary its logits cover (must equal the target's)."""

    @property
    @abstractmethod
    def device(self) -> torch.device:
        """Where its logits live."""

    @abstractmethod
    def reset(self, max_len: int) -> None:
        """Start a new sequence; context plus drafted nodes will not exceed `max_len` tokens."""

    def observe(self, features: TargetFeatures) -> None:
        """Take the target's features of the next committed tokens (only if `feature_layers` is set)."""

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """See every verify pass: the tree fed (node 0 = root) and the target's logits [n, V] at each node.

        A no-op for most drafters; lookahead decoding takes its Jacobi updates from it.
        """

    @abstractmethod
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        """Draft logits [len(frontier), V] after each frontier node.

        context: the committed tokens before the root; (tokens, parents): the tree so far, whose
        node 0 is the root (the last token the target gave); frontier: leaves of that tree.
        """


class ModelDrafter(Drafter):
    """A causal LM as drafter: a separate small model, or the quantized self.

    It keeps its own KV cache across decoding steps and syncs it to each request by longest common
    prefix (truncate to it, forward only the new tokens). Tree nodes never stay in the cache,
    because mini_llm's mask cannot hide cached siblings from each other: each call forwards the new
    chain tokens plus the tree's off-trunk nodes (the trunk is the root and its single-child chain)
    under the tree mask, then truncates back to the trunk. One forward per call, no re-prefill.
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model
        self.cache: KVCache | None = None
        self.seq: list[int] = []  # the tokens whose K/V are in self.cache

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.num_parameters():,} parameters)"

    @property
    def vocab_size(self) -> int:
        return self.model.cfg.vocab_size

    @property
    def device(self) -> torch.device:
        return self.model.device

    def reset(self, max_len: int) -> None:
        if self.cache is None or self.cache.max_len < max_len:
            self.cache = self.model.new_cache(batch_size=1, max_len=max_len)
        self.cache.truncate(0)
        self.seq = []

    @torch.inference_mode()
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        device = self.model.device
        kids: list[list[int]] = [[] for _ in parents]
        for i in range(1, len(parents)):
            kids[parents[i]].append(i)
        trunk = [0]
        while len(kids[trunk[-1]]) == 1:
            trunk.append(kids[trunk[-1]][0])
        seq = [*context, *(tokens[i] for i in trunk)]
        needed: set[int] = set()
        for node in frontier:
            while node >= 0 and node not in needed:
                needed.add(node)
                node = parents[node]
        branch = sorted(needed - set(trunk))  # frontier nodes and their ancestors below the trunk

        if self.cache is None or len(seq) + len(branch) > self.cache.max_len:
            self.reset(2 * (len(seq) + len(branch)))
        keep = min(_common_prefix(self.seq, seq), len(seq) - 1)
        self.cache.truncate(keep)
        fresh = seq[keep:]
        m = len(fresh)
        ids = torch.tensor([fresh + [tokens[i] for i in branch]], device=device)
        pos = mask = None
        if branch:
            depth = depths(parents)
            pos = torch.tensor(list(range(keep, len(seq))) + [len(context) + depth[i] for i in branch], device=device)
            mask = torch.ones(m + len(branch), m + len(branch), dtype=torch.bool, device=device).tril()
            sub = [parents[i] for i in branch]  # re-index the branch nodes as a forest below the trunk
            index = {node: j for j, node in enumerate(branch)}
            mask[m:, m:] = tree_mask([-1] + [index[p] + 1 if p in index else 0 for p in sub], device)[1:, 1:]
        logits = self.model(ids, cache=self.cache, positions=pos, mask=mask)[0]
        self.calls += 1
        self.cache.truncate(len(seq))
        self.seq = seq
        row = {trunk[-1]: m - 1} | {node: m + j for j, node in enumerate(branch)}
        return logits[torch.tensor([row[f] for f in frontier], device=device)]


class QuantizedSelfDrafter(ModelDrafter):
    """The target's own weights, INT-`bits` group fake-quantized (the chapter's 'quantized self')."""

    def __init__(self, target: Transformer, bits: int = 4, group: int = 128) -> None:
        super().__init__(quantized_copy(target, bits=bits, granularity="group", group=group))
        self.bits = bits

    def __repr__(self) -> str:
        return f"QuantizedSelfDrafter(INT{self.bits}, {self.model.num_parameters():,} parameters)"


def as_drafter(drafter: Drafter | Transformer) -> Drafter:
    """A Drafter as is; a plain Transformer wrapped as the separate-small-model drafter."""
    if isinstance(drafter, Drafter):
        return drafter
    if isinstance(drafter, Transformer):
        return ModelDrafter(drafter)
    raise TypeError(f"expected a Drafter or a mini_llm Transformer, got {type(drafter).__name__}")


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
