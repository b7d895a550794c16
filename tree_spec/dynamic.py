"""EAGLE-2 dynamic draft trees: grow where the draft is confident, keep the `total_tokens` best nodes.

Expansion: at each of `depth` levels, the `top_k` nodes of the newest level with the highest
cumulative draft log-probability (the product of draft probabilities along the path, EAGLE-2's
estimate of the chance that the target accepts the path) each get `top_k` children.
Reranking: of all candidates, keep the `total_tokens` with the highest cumulative log-probability.
A child never scores above its parent and greedy siblings come in descending order, so the kept
set is a valid tree. Verification is unchanged, so greedy output stays identical to plain decoding.

Under sampling, children are drawn without replacement from the draft distribution. `verify_tree`
stays exact if whether a drawn child is kept never depends on its own value (or its subtree's):
so a child's score is its parent's plus the log of the j-th largest draft probability (j = its draw
rank), which equals its own log-probability in the greedy case, and the kept children of every
node are a prefix of its draw order (a node becomes eligible once its parent and previous sibling
are kept; its descendants only after itself).
"""
from __future__ import annotations

import heapq
from collections.abc import Sequence

import torch

from mini_llm import Transformer, logits_to_probs
from mini_llm.generate import as_int

from .drafters import Drafter, as_drafter
from .output import SpecOutput
from .tree import DraftTree, speculate, tree_step


@torch.inference_mode()
def build_dynamic_tree(
    drafter: Drafter | Transformer,
    context: Sequence[int],
    root: int,
    depth: int = 5,
    top_k: int = 4,
    total_tokens: int = 24,
    temperature: float = 0.0,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> DraftTree:
    """An EAGLE-2 tree below `root` with at most `total_tokens` draft nodes (exactly that many when the
    expansion produced enough candidates), at most `depth` deep. One drafter call per level."""
    depth, top_k, total_tokens = as_int(depth, "depth"), as_int(top_k, "top_k"), as_int(total_tokens, "total_tokens")
    if depth < 0 or top_k < 1 or total_tokens < 0:
        raise ValueError(f"need depth >= 0, top_k >= 1, total_tokens >= 0; got {depth}, {top_k}, {total_tokens}")
    drafter = as_drafter(drafter)
    tokens, parents, score = [int(root)], [-1], [0.0]
    children: list[list[int]] = [[]]
    rows: dict[int, torch.Tensor] = {}
    frontier = [0]
    for _ in range(depth if total_tokens else 0):
        logits = drafter.next_logits(context, tokens, parents, frontier)  # [len(frontier), V]
        if temperature == 0.0:
            logp = torch.log_softmax(logits.float(), dim=-1)
            picks = logp.topk(min(top_k, logp.shape[-1]), dim=-1).indices.tolist()
        else:
            probs = logits_to_probs(logits, temperature, None, top_p)
            logp = probs.log()
            picks = [
                torch.multinomial(p, min(top_k, int((p > 0).sum())), replacement=False, generator=generator).tolist()
                for p in probs
            ]
            rows.update(zip(frontier, probs))
        slot = logp.topk(min(top_k, logp.shape[-1]), dim=-1).values.tolist()  # [len(frontier), top_k]
        level = []
        for r, (node, kids) in enumerate(zip(frontier, picks)):
            for rank, token in enumerate(kids):
                tokens.append(token)
                parents.append(node)
                score.append(score[node] + slot[r][rank])
                children.append([])
                children[node].append(len(tokens) - 1)
                level.append(len(tokens) - 1)
        frontier = sorted(sorted(level, key=lambda i: -score[i])[:top_k])
    keep = _rerank(children, parents, score, total_tokens)
    new_id = {old: new for new, old in enumerate(keep)}
    tree = DraftTree([tokens[i] for i in keep], [new_id[parents[i]] if i else -1 for i in keep])
    if temperature != 0.0:
        tree.draft_probs = torch.zeros(len(keep), drafter.vocab_size, device=drafter.device)
        for old, new in new_id.items():
            if old in rows:
                tree.draft_probs[new] = rows[old]
    return tree


def _rerank(children: list[list[int]], parents: list[int], score: list[float], total_tokens: int) -> list[int]:
    """The root plus the best `total_tokens` nodes, sorted by id; a node becomes eligible once its
    parent and its previous sibling are kept (so the result is a tree with prefix-closed children)."""
    keep = [0]
    heap = [(-score[children[0][0]], children[0][0], 0)] if children[0] else []
    while heap and len(keep) <= total_tokens:
        _, node, rank = heapq.heappop(heap)
        keep.append(node)
        siblings = children[parents[node]]
        if rank + 1 < len(siblings):
            heapq.heappush(heap, (-score[siblings[rank + 1]], siblings[rank + 1], rank + 1))
        if children[node]:
            heapq.heappush(heap, (-score[children[node][0]], children[node][0], 0))
    return sorted(keep)


@torch.inference_mode()
def dynamic_tree_speculative_generate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    depth: int = 5,
    top_k: int = 4,
    total_tokens: int = 24,
    temperature: float = 0.0,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
) -> SpecOutput:
    """Tree speculative decoding with EAGLE-2 dynamic trees (any drafter; EAGLE heads in the paper).

    Greedy reproduces `generate(target, prompt, max_new_tokens)` (exactly in fp32; in bf16 a near-tie
    between two logits may flip); sampling is lossless (`verify_tree`). `top_k` here is the expansion
    width of each level (DESIGN.md's name), not sampling truncation.
    """
    depth, top_k, total_tokens = as_int(depth, "depth"), as_int(top_k, "top_k"), as_int(total_tokens, "total_tokens")

    def grow(drafter: Drafter, context: list[int], root: int, max_depth: int) -> DraftTree:
        return build_dynamic_tree(drafter, context, root, min(depth, max_depth), top_k, total_tokens,
                                  temperature, top_p, generator)

    step = tree_step(target, grow, temperature, None, top_p, generator)
    return speculate(target, drafter, prompt_ids, max_new_tokens, total_tokens + 1, step,
                     temperature, None, top_p, generator, eos_token_id)
