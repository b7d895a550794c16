"""A causal language model as drafter: a separate small model, or the target's own quantized weights."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import KVCache, Transformer, quantized_copy

from ..core.contracts import Proposer
from ..core.proposal import check_proposer
from ..core.topology import children, depths, tree_mask
from .base import Drafter, _common_prefix
from .batch import BatchModelDrafter


class ModelDrafter(Drafter):
    """A causal LM as drafter: a separate small model, or the quantized self.

    It keeps its own KV cache across decoding steps and syncs it to each request by longest common
    prefix (truncate to it, forward only the new tokens). Tree nodes never stay in the cache,
    because mini_llm's mask cannot hide cached siblings from each other: each call forwards the new
    chain tokens plus the tree's off-trunk nodes (the trunk is the root and its single-child chain)
    under the tree mask, then truncates back to the trunk. One forward per call, no re-prefill.
    """

    fixed_shape_twin = "model"

    def __init__(self, model: Transformer) -> None:
        super().__init__(model.cfg.vocab_size, model.device)
        self.model = model
        self.cache: KVCache | None = None
        self.seq: list[int] = []  # the tokens whose K/V are in self.cache

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.num_parameters():,} parameters)"

    def batched(self) -> BatchModelDrafter:
        """Its form for the batched loop: the same model drafting every row's chain in one forward per level."""
        return BatchModelDrafter(self.model)

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
        kids = children(parents)
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
    """The target's own weights, INT-`bits` group fake-quantized: the 'quantized self' drafter (no second model)."""

    def __init__(self, target: Transformer, bits: int = 4, group: int = 128) -> None:
        super().__init__(quantized_copy(target, bits=bits, granularity="group", group=group))
        self.bits = bits

    def __repr__(self) -> str:
        return f"QuantizedSelfDrafter(INT{self.bits}, {self.model.num_parameters():,} parameters)"


def as_drafter(drafter: Proposer | Transformer) -> Proposer:
    """A Proposer as is; a plain Transformer wrapped as the separate-small-model drafter; anything else refused,
    naming the Proposer members it lacks (`check_proposer`)."""
    if isinstance(drafter, Transformer):
        return ModelDrafter(drafter)
    return check_proposer(drafter)
