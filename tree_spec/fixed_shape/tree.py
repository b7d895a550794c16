"""EAGLE-2 dynamic trees in fixed shapes, for a GPU: the tree changes every step, its shapes never do.

`dynamic_tree_speculative_generate` grows the tree with Python lists and a heap. Here every step has the
same tensor shapes, so it is captured once as a CUDA graph (`StaticLoop`):
- drafting: the root's top_k children, then `depth - 1` head calls over exactly top_k frontier nodes each
  (the top_k best children of the previous frontier by cumulative draft log-probability), each node
  attending to the committed pairs, its ancestors' slots and itself;
- reranking: of the top_k + (depth - 1) * top_k² candidates, the `total_tokens` best by score (a child
  scores strictly below its parent, so the kept set is a tree), sorted so that parents come first;
- verifying: one target pass over exactly total_tokens + 1 nodes, the tree mask built on the device;
- accepting: the deepest node whose whole path the target agrees with; its path (padded to depth + 1)
  is compacted in the cache, and the head catches up on the depth + 1 padded pairs as in a chain.
Greedy only (the output equals `generate`, exactly in fp32); recurrent heads only (EAGLE-1, EAGLE-3, MTP).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import Transformer
from mini_llm.generate import as_int

from .drafters import Drafter, TargetFeatures, as_drafter
from .feature_drafters import HeadDrafter
from .output import SpecOutput
from .static_chain import StaticHeadDrafter, StaticLoop
from .tree import _prompt_list, target_forward

TIE_BREAK = 1e-6  # subtracted per depth from a candidate's score: a child never ties its parent in the rerank


class StaticTree(StaticLoop):
    """EAGLE-2 trees (depth levels, top_k expansion width, total_tokens draft nodes) in fixed shapes."""

    def __init__(
        self,
        target: Transformer,
        drafter: Drafter,
        max_len: int,
        depth: int = 5,
        top_k: int = 4,
        total_tokens: int = 24,
        graphs: bool | None = None,
    ) -> None:
        depth, top_k, total_tokens = as_int(depth, "depth"), as_int(top_k, "top_k"), as_int(total_tokens, "total_tokens")
        candidates = top_k + (depth - 1) * top_k * top_k
        if depth < 1 or top_k < 1 or not 1 <= total_tokens <= candidates:
            raise ValueError(f"need depth >= 1, top_k >= 1 and 1 <= total_tokens <= {candidates} candidates; "
                             f"got {depth}, {top_k}, {total_tokens}")
        drafter = as_drafter(drafter)
        if not isinstance(drafter, HeadDrafter):
            raise ValueError(f"StaticTree drafts with a recurrent head (EAGLE, EAGLE-3, MTP), not "
                             f"{type(drafter).__name__}: use dynamic_tree_speculative_generate for it")
        super().__init__(target, drafter, max_len, graphs=graphs)
        self.depth, self.top_k, self.total_tokens = depth, top_k, total_tokens
        self.region = (depth - 1) * top_k  # head cache slots the drafted levels use after the committed pairs
        self.drafter = StaticHeadDrafter(drafter, max_len + 1 + self.region, self.choose)
        self.room = max(total_tokens, depth) + 1
        self.draft_calls_per_step = depth  # the catch-up call (which also yields level 1) + depth - 1 levels
        device = target.device
        self.levels = torch.arange(depth + 1, device=device)
        self.nodes = torch.arange(1, total_tokens + 1, device=device)
        self.is_root = torch.arange(total_tokens + 1, device=device) == 0

    def _drafted(self, room: int) -> tuple[int, int]:
        return self.total_tokens, self.depth

    def _draft(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> candidate tokens, scores, parent candidate (-1: the root) and depth, each [M]."""
        head, K = self.drafter, self.top_k
        logp = torch.log_softmax(head.drafter.logits(head.root_out[None])[0].float(), -1)
        best = logp.topk(K)
        tokens, scores = [best.indices], [best.values]
        parents = [torch.full((K,), -1, device=logp.device)]
        depths = [torch.ones(K, dtype=torch.long, device=logp.device)]
        frontier, f_tokens, f_scores = torch.arange(K, device=logp.device), best.indices, best.values
        f_features = head.root_out.expand(K, -1)
        seen = torch.zeros(K, self.region, dtype=torch.bool, device=logp.device)  # drafted slots each node sees
        rel = head.cache.slots - head.committed  # head slot index relative to the first drafted slot
        in_region = (rel >= 0) & (rel < self.region)
        rows = torch.arange(K, device=logp.device)
        count = K
        for level in range(1, self.depth):  # frontier node j is written at drafted slot (level - 1) * K + j
            seen = seen.clone()
            seen[rows, (level - 1) * K + rows] = True  # its ancestors' slots (inherited) and its own
            mask = (rel < 0) | (in_region & seen.gather(1, rel.clamp(0, self.region - 1).expand(K, -1)))
            positions = (head.committed + level).expand(K)
            out = head._pairs(f_features, f_tokens, positions, mask)  # [K, C]
            logp = torch.log_softmax(head.drafter.logits(out).float(), -1)
            best = logp.topk(K)  # [K, K]
            child_scores = (f_scores[:, None] + best.values).flatten()
            tokens.append(best.indices.flatten())
            scores.append(child_scores)
            parents.append(frontier.repeat_interleave(K))
            depths.append(torch.full((K * K,), level + 1, device=logp.device))
            pick = child_scores.topk(K).indices
            frontier, f_tokens, f_scores = count + pick, tokens[-1][pick], child_scores[pick]
            f_features, seen = out[pick // K], seen[pick // K]
            count += K * K
        return torch.cat(tokens), torch.cat(scores), torch.cat(parents), torch.cat(depths)

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root [] -> (next root [], [n, then the depth + 1 emitted tokens: n drafts, the target's token, filler])."""
        cache, head, D = self.cache, self.drafter, self.depth
        cand_tokens, cand_scores, cand_parents, cand_depths = self._draft()
        kept = (cand_scores - TIE_BREAK * cand_depths).topk(self.total_tokens).indices.sort().values  # [N]
        node_of = torch.zeros_like(cand_parents)
        node_of[kept] = self.nodes  # candidate -> tree node id (1..N); parents come before children
        parent_cand = cand_parents[kept]
        parents = torch.cat((root.new_zeros(1), torch.where(parent_cand < 0, 0, node_of[parent_cand.clamp_min(0)])))
        tokens = torch.cat((root[None], cand_tokens[kept]))  # [N + 1]
        depth = torch.cat((root.new_zeros(1), cand_depths[kept]))
        sees = torch.eye(len(tokens), dtype=torch.bool, device=root.device)
        for _ in range(D):  # node i sees itself and, after d rounds, its ancestors up to d levels up
            sees = sees | sees[parents]
        start = cache.length.clone()
        logits, feats = target_forward(self.target, head, tokens[None], cache, (start + depth)[None], sees)
        predicted = logits.argmax(-1)  # [N + 1]
        agrees = (tokens == predicted[parents]) | self.is_root  # the root is the target's own token
        accepted = ~(sees & ~agrees[None]).any(1)  # every node on its path (itself included) agrees
        best = (depth * accepted).argmax()  # the deepest accepted node: accepted nodes form one path
        n = depth[best]
        path = (sees[best][None] & (depth[None] == self.levels[:, None])).long().argmax(1)  # [D + 1], 0 past n
        next_token = predicted[best]
        cache.compact(start, path, n + 1)
        features = TargetFeatures(feats.hidden[path], tuple(x[path] for x in feats.layers))
        chain = tokens[path]
        head.commit(chain, next_token, n, features)
        emitted = torch.cat((chain[1:], next_token[None])).scatter(0, n[None], next_token[None])
        return next_token, torch.cat((n[None], emitted))


def static_dynamic_tree_generate(
    target: Transformer,
    drafter: Drafter,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    depth: int = 5,
    top_k: int = 4,
    total_tokens: int = 24,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    graphs: bool | None = None,
) -> SpecOutput:
    """`dynamic_tree_speculative_generate` (greedy) in fixed shapes: one request through a fresh `StaticTree`
    sized for it (it captures its graph for this request only; keep a StaticTree to serve many)."""
    budget = max(as_int(max_new_tokens, "max_new_tokens"), 0)
    room = max(as_int(total_tokens, "total_tokens"), as_int(depth, "depth")) + 1
    tree = StaticTree(target, drafter, len(_prompt_list(prompt_ids)) + budget + room + 1, depth, top_k, total_tokens,
                      graphs)
    return tree.generate(prompt_ids, max_new_tokens, eos_token_id)
