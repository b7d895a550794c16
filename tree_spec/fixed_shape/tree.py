"""EAGLE-2 dynamic trees in fixed shapes (`FixedShapeLoop`): the tree changes every step, its shapes never do.

`dynamic_tree_speculative_generate` grows the tree with Python lists. Here every step has the same tensor
shapes, so it is captured once as a CUDA graph:
- drafting: the root's `width` children, then `depth - 1` head calls over exactly `width` frontier nodes each
  (the `width` best children of the previous frontier by cumulative draft log-probability), each node
  attending to the committed pairs, its ancestors' slots and itself;
- reranking (`core.growth.rerank`): of the width + (depth - 1) * width² candidates, the `total_tokens` best by
  score (a child scores strictly below its parent, so the kept set is a tree), in candidate order, so that
  parents come first;
- verifying: one target pass over exactly total_tokens + 1 nodes, the tree mask built on the device;
- accepting (`core.accept.tree_accepted_nodes`): the deepest node whose whole path the target agrees with; its
  path (padded to depth + 1) is compacted in the cache, and the head catches up on the depth + 1 padded pairs
  as in a chain.
Greedy only (the output equals `generate`, exactly in fp32); recurrent heads only (EAGLE-1, EAGLE-3, MTP).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer
from mini_llm.generate import as_int

from ..core.accept import deepest_accepted, tree_accepted_nodes
from ..core.contracts import Proposer, TargetFeatures
from ..core.growth import rerank
from ..core.output import SpecOutput
from ..core.request import validate_request
from ..core.topology import ancestor_mask
from ..decoding.loop import target_forward
from ..drafters.model import as_drafter
from .drafters import FixedShapeHeadDrafter, twin_kind
from .loop import FixedShapeLoop


class FixedShapeDynamicTree(FixedShapeLoop):
    """EAGLE-2 trees (`depth` levels, expansion `width`, `total_tokens` draft nodes) in fixed shapes."""

    drafter: FixedShapeHeadDrafter

    def __init__(
        self,
        target: Transformer,
        drafter: Proposer,
        max_len: int,
        depth: int = 5,
        width: int = 4,
        total_tokens: int = 24,
        graphs: bool | None = None,
    ) -> None:
        depth, width = as_int(depth, "depth"), as_int(width, "width")
        total_tokens = as_int(total_tokens, "total_tokens")
        candidates = width + (depth - 1) * width * width
        if depth < 1 or width < 1 or not 1 <= total_tokens <= candidates:
            raise ValueError(f"need depth >= 1, width >= 1 and 1 <= total_tokens <= {candidates} candidates; "
                             f"got {depth}, {width}, {total_tokens}")
        drafter = as_drafter(drafter)
        twin_kind(drafter, ("recurrent_head",), "FixedShapeDynamicTree", "dynamic_tree_speculative_generate")
        super().__init__(target, max_len, graphs=graphs)
        self.depth, self.width, self.total_tokens = depth, width, total_tokens
        self.region = (depth - 1) * width  # head cache slots the drafted levels use after the committed pairs
        self.drafter = FixedShapeHeadDrafter(drafter, max_len + 1 + self.region)
        self.room = max(total_tokens, depth) + 1
        self.draft_calls_per_step = depth  # the catch-up call (which also yields level 1) + depth - 1 levels
        device = target.device
        self.levels = torch.arange(depth + 1, device=device)
        self.nodes = torch.arange(1, total_tokens + 1, device=device)

    def _drafted(self, room: int) -> tuple[int, int]:
        return self.total_tokens, self.depth

    def _draft(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> candidate tokens, scores, parent candidate (-1: the root) and depth, each [M], M = width + (depth - 1)
        * width², numbered level by level (parents before children, siblings in descending score)."""
        head, W = self.drafter, self.width
        logp = torch.log_softmax(head.drafter.logits(head.root_out[None])[0].float(), -1)
        best = logp.topk(W)
        tokens, scores = [best.indices], [best.values]
        parents = [torch.full((W,), -1, device=logp.device)]
        depths = [torch.ones(W, dtype=torch.long, device=logp.device)]
        frontier, f_tokens, f_scores = torch.arange(W, device=logp.device), best.indices, best.values
        f_features = head.root_out.expand(W, -1)
        seen = torch.zeros(W, self.region, dtype=torch.bool, device=logp.device)  # drafted slots each node sees
        rel = head.cache.slots - head.committed  # head slot index relative to the first drafted slot
        in_region = (rel >= 0) & (rel < self.region)
        rows = torch.arange(W, device=logp.device)
        count = W
        for level in range(1, self.depth):  # frontier node j is written at drafted slot (level - 1) * W + j
            seen = seen.clone()
            seen[rows, (level - 1) * W + rows] = True  # its ancestors' slots (inherited) and its own
            mask = (rel < 0) | (in_region & seen.gather(1, rel.clamp(0, self.region - 1).expand(W, -1)))
            positions = (head.committed + level).expand(W)
            out = head.forward_pairs(f_features, f_tokens, positions, mask)  # [W, C]
            logp = torch.log_softmax(head.drafter.logits(out).float(), -1)
            best = logp.topk(W)  # [W, W]
            child_scores = (f_scores[:, None] + best.values).flatten()
            tokens.append(best.indices.flatten())
            scores.append(child_scores)
            parents.append(frontier.repeat_interleave(W))
            depths.append(torch.full((W * W,), level + 1, device=logp.device))
            pick = child_scores.topk(W).indices
            frontier, f_tokens, f_scores = count + pick, tokens[-1][pick], child_scores[pick]
            f_features, seen = out[pick // W], seen[pick // W]
            count += W * W
        return torch.cat(tokens), torch.cat(scores), torch.cat(parents), torch.cat(depths)

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root [] -> (next root [], [n, then the depth + 1 emitted tokens: n drafts, the target's token, filler])."""
        cache, head = self.cache, self.drafter
        cand_tokens, cand_scores, cand_parents, cand_depths = self._draft()
        kept = rerank(cand_scores, cand_depths, self.total_tokens)  # [N] candidate ids, ascending
        node_of = torch.zeros_like(cand_parents)
        node_of[kept] = self.nodes  # candidate -> tree node id (1..N); parents come before children
        parent_cand = cand_parents[kept]
        parents = torch.cat((root.new_zeros(1), torch.where(parent_cand < 0, 0, node_of[parent_cand.clamp_min(0)])))
        tokens = torch.cat((root[None], cand_tokens[kept]))  # [N + 1]
        depth = torch.cat((root.new_zeros(1), cand_depths[kept]))
        sees = ancestor_mask(parents, self.depth)  # [N + 1, N + 1]: each node, itself and its ancestors
        start = cache.length.clone()
        logits, feats = target_forward(self.target, head, tokens[None], cache, (start + depth)[None], sees)
        predicted = logits.argmax(-1)  # [N + 1]
        accepted = tree_accepted_nodes(tokens, parents, sees, predicted)
        best = deepest_accepted(accepted, depth)[None]  # [1]: a 0-dim index would be read on the host
        n = depth[best][0]
        path = (sees[best] & (depth[None] == self.levels[:, None])).long().argmax(1)  # [depth + 1], 0 past n
        next_token = predicted[best][0]
        cache.compact(start, path, n + 1)
        chain = tokens[path]
        head.commit(chain, next_token, n, TargetFeatures(feats.hidden[path], tuple(x[path] for x in feats.layers)))
        emitted = torch.cat((chain[1:], next_token[None])).scatter(0, n[None], next_token[None])
        return next_token, torch.cat((n[None], emitted))


def fixed_shape_dynamic_tree_generate(
    target: Transformer, drafter: Proposer, prompt_ids: Sequence[int] | torch.Tensor, max_new_tokens: int,
    depth: int = 5, width: int = 4, total_tokens: int = 24,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    graphs: bool | None = None,
) -> SpecOutput:
    """`dynamic_tree_speculative_generate` (greedy) in fixed shapes: one request through a fresh
    `FixedShapeDynamicTree` sized for it (it captures its graph for this request only; keep one to serve many)."""
    drafter = as_drafter(drafter)
    request = validate_request(target.cfg, drafter.vocab_size, prompt_ids, max_new_tokens, eos_token_id)
    room = max(as_int(total_tokens, "total_tokens"), as_int(depth, "depth")) + 1
    tree = FixedShapeDynamicTree(target, drafter, len(request.prompt) + request.max_new_tokens + room + 1, depth,
                                 width, total_tokens, graphs)
    return tree.run(request)
