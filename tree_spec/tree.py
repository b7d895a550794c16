"""Token trees: draft a tree level by level, verify it in ONE target forward, keep the accepted path's KV.

The verify pass feeds [root, drafts...] with positions prefix_len + depth and mask `tree_mask(parents)`,
so every node sees exactly its own path; afterwards `cache.compact(start, path)` keeps the K/V of the
accepted path (computed in that same pass) and drops the rejected branches.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from mini_llm import KVCache, Transformer, logits_to_probs, sample_next
from mini_llm.generate import as_int, check_budget, eos_token_ids, prompt_tensor

from .drafters import Drafter, TargetFeatures, as_drafter
from .output import SpecOutput
from .sampling import verify_tree
from .speedup import tree_node_count
from .topology import depths, positions, tree_mask, validate_parents

__all__ = [
    "DraftTree", "accept_greedy", "build_draft_tree", "depths", "positions", "target_forward", "tree_mask",
    "tree_speculative_generate", "validate_parents",
]

# step(drafter, cache, context, root, max_depth) -> (accepted draft tokens, next token, proposed, drafted depth,
#                                                     target features of the committed rows or None)
Step = Callable[
    [Drafter, KVCache, list[int], int, int], tuple[list[int], int, int, int, TargetFeatures | None]
]
# grow(drafter, context, root, max_depth) -> the tree to verify, at most max_depth deep
Grow = Callable[[Drafter, list[int], int, int], "DraftTree"]


@dataclass
class DraftTree:
    """A drafted tree; unpacks as `tokens, parents = tree`.

    draft_probs [n, V]: row i is the distribution node i's children were sampled from (without
    replacement, children in index order = draw order); rows of leaves are 0. None when greedy.
    """

    tokens: list[int]
    parents: list[int]
    draft_probs: torch.Tensor | None = None

    def __iter__(self):
        return iter((self.tokens, self.parents))


@torch.inference_mode()
def build_draft_tree(
    drafter: Drafter | Transformer,
    context: Sequence[int],
    root: int,
    branching: Sequence[int],
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    min_path_prob: float = 0.0,
) -> DraftTree:
    """Grow a tree below `root` (the last committed token, after `context`), one drafter call per level.

    Each node at level l gets the drafter's top-w_l tokens (temperature 0), or w_l tokens sampled
    without replacement from its temperature/top-k/top-p distribution (fewer if it has fewer nonzero
    entries). `branching=[1] * k` drafts a chain.
    min_path_prob: a node whose path probability under the draft (the product of its ancestors' and its
    own draft probabilities) is below this gets no children, and the tree stops growing when no node
    may grow (EAGLE-2's confidence rule; a chain stops early). It reads only the draft's distribution, so
    verification stays lossless.
    """
    drafter = as_drafter(drafter)
    if not 0.0 <= min_path_prob <= 1.0:
        raise ValueError(f"min_path_prob must be in [0, 1], got {min_path_prob}")
    branching = [as_int(w, "branching width") for w in branching]
    tree_node_count(branching)  # validates branching
    tokens, parents, frontier = [int(root)], [-1], [0]
    path_prob = [1.0]
    sampled = temperature != 0.0
    draft_rows: list[tuple[int, torch.Tensor]] = []
    for width in branching:
        if not frontier:
            break
        logits = drafter.next_logits(context, tokens, parents, frontier)  # [len(frontier), V]
        if sampled:
            probs = logits_to_probs(logits, temperature, top_k, top_p)
            draft_rows += zip(frontier, probs)
            children = [
                torch.multinomial(p, min(width, int((p > 0).sum())), replacement=False, generator=generator).tolist()
                for p in probs
            ]
        else:
            probs = logits.float().softmax(-1) if min_path_prob else None
            children = logits.topk(min(width, logits.shape[-1]), dim=-1).indices.tolist()
        # a node's children may be fewer than its width (sampling without replacement): one row at a time
        child_probs = [p[kids].tolist() for p, kids in zip(probs, children)] if min_path_prob else None
        next_frontier = []
        for j, (node, kids) in enumerate(zip(frontier, children)):
            for c, token in enumerate(kids):
                tokens.append(token)
                parents.append(node)
                path_prob.append(path_prob[node] * child_probs[j][c] if min_path_prob else 1.0)
                if path_prob[-1] >= min_path_prob:
                    next_frontier.append(len(tokens) - 1)
        frontier = next_frontier
    if not sampled:
        return DraftTree(tokens, parents)
    draft_probs = torch.zeros(len(tokens), drafter.vocab_size, device=drafter.device)
    for node, p in draft_rows:
        draft_probs[node] = p
    return DraftTree(tokens, parents, draft_probs)


def accept_greedy(tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> list[int]:
    """Longest root path the target agrees with -> node ids, starting with 0.

    target_logits [n, V]: row i is the target's prediction after node i's path. From the root,
    follow the child whose token is the target's argmax, while there is one.
    """
    validate_parents(parents)
    if not len(tokens) == len(parents) == target_logits.shape[0]:
        raise ValueError(
            f"tokens ({len(tokens)}), parents ({len(parents)}) and target_logits "
            f"({target_logits.shape[0]} rows) differ in length"
        )
    predicted = target_logits.argmax(-1).tolist()
    child_by_token: dict[tuple[int, int], int] = {}
    for i in range(len(parents) - 1, 0, -1):  # first child wins on duplicate tokens
        child_by_token[parents[i], int(tokens[i])] = i
    path = [0]
    while (path[-1], predicted[path[-1]]) in child_by_token:
        path.append(child_by_token[path[-1], predicted[path[-1]]])
    return path


def target_forward(
    target: Transformer,
    drafter: Drafter,
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
    by_layer = dict(zip(sorted(set(layers)), out[2])) if layers else {}  # the model returns them in layer order
    feats = TargetFeatures(out[1][0], tuple(by_layer[i][0] for i in layers))
    return out[0][0], feats


def tree_step(
    target: Transformer,
    grow: Grow,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Step:
    """The step of tree decoding: `grow` a tree, verify it in one target pass, compact the accepted path.

    Shared by static trees (`tree_speculative_generate`) and dynamic ones (`tree_spec.dynamic`).
    """
    device = target.device

    def step(drafter: Drafter, cache: KVCache, context: list[int], root: int, max_depth: int):
        tree = grow(drafter, context, root, max_depth)
        start = cache.length
        ids = torch.tensor([tree.tokens], device=device)
        pos, mask = positions(tree.parents, start, device), tree_mask(tree.parents, device)
        logits, feats = target_forward(target, drafter, ids, cache, pos, mask)  # one pass for the whole tree
        drafter.observe_verify(tree.tokens, tree.parents, logits)
        if temperature == 0.0:
            path = accept_greedy(tree.tokens, tree.parents, logits)
            next_token = int(logits[path[-1]].argmax())
        else:
            target_probs = logits_to_probs(logits, temperature, top_k, top_p)
            draft_probs = tree.draft_probs.to(device)
            path, next_token = verify_tree(tree.tokens, tree.parents, draft_probs, target_probs, generator)
        cache.compact(start, path)
        depth = max(depths(tree.parents))
        return [tree.tokens[i] for i in path[1:]], next_token, len(tree.tokens) - 1, depth, feats and feats.rows(path)

    return step


@torch.inference_mode()
def tree_speculative_generate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    branching: Sequence[int] = (2, 2, 1, 1),
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
) -> SpecOutput:
    """Tree speculative decoding: draft a tree with `branching`, verify it in one target forward.

    Greedy (temperature 0) reproduces `generate(target, prompt, max_new_tokens)` token for token;
    sampling accepts with `verify_tree` (lossless: the output follows the target's distribution).
    prompt_ids: list[int] or LongTensor [1, T]. Returns SpecOutput with the new tokens only.
    Greedy identity is exact in fp32; in bf16 a near-tie between two logits may flip (the tree pass
    and plain decoding batch the same tokens differently, so their roundings differ).
    """
    branching = [as_int(w, "branching width") for w in branching]

    def grow(drafter: Drafter, context: list[int], root: int, max_depth: int) -> DraftTree:
        return build_draft_tree(drafter, context, root, branching[:max_depth], temperature, top_k, top_p, generator)

    step = tree_step(target, grow, temperature, top_k, top_p, generator)
    return speculate(
        target, drafter, prompt_ids, max_new_tokens, tree_node_count(branching) + 1, step,
        temperature, top_k, top_p, generator, eos_token_id,
    )


def speculate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    draft_room: int,
    step: Step,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None,
) -> SpecOutput:
    """The loop shared by chain and tree decoding: prefill, then `step` until the budget or EOS.

    `step` drafts at most `max_depth` tokens deep (so a step never overshoots max_new_tokens),
    verifies them against `cache` (which holds every committed token but the root) and leaves the
    cache holding the committed ones. `draft_room`: the most nodes one verify pass feeds.
    A feature-level drafter observes the prefill's rows, then each step's committed rows (root and
    accepted drafts, in path order), so it always holds one feature row per context token.
    """
    start_time = time.perf_counter()
    prompt = _prompt_list(prompt_ids)
    drafter = as_drafter(drafter)
    if drafter.vocab_size != target.cfg.vocab_size:
        raise ValueError(f"drafter vocabulary ({drafter.vocab_size}) != target vocabulary ({target.cfg.vocab_size})")
    max_new_tokens = check_budget(len(prompt), max_new_tokens, target.cfg.max_position_embeddings)
    eos = set(eos_token_ids(eos_token_id))
    out = SpecOutput()
    if max_new_tokens == 0:
        return out
    max_len = len(prompt) + max_new_tokens + draft_room
    cache = target.new_cache(batch_size=1, max_len=max_len)
    drafter.reset(max_len)
    draft_calls = drafter.calls

    logits, feats = target_forward(target, drafter, torch.tensor([prompt], device=target.device), cache)
    if feats is not None:
        drafter.observe(feats)
    out.target_calls = 1
    out.tokens.append(int(sample_next(logits[-1:], temperature, top_k, top_p, generator)))
    while len(out.tokens) < max_new_tokens and out.tokens[-1] not in eos:
        max_depth = max_new_tokens - len(out.tokens) - 1
        context, root = prompt + out.tokens[:-1], out.tokens[-1]
        accepted, next_token, proposed, depth, feats = step(drafter, cache, context, root, max_depth)
        if feats is not None:
            drafter.observe(feats)
        new = accepted + [next_token]
        stop = next((i for i, t in enumerate(new) if t in eos), len(new) - 1)
        out.record_verify(min(len(accepted), stop + 1), proposed, depth)
        out.tokens += new[: stop + 1]
    out.draft_calls = drafter.calls - draft_calls
    out.seconds = time.perf_counter() - start_time
    return out


def _prompt_list(prompt_ids: Sequence[int] | torch.Tensor) -> list[int]:
    """list[int] or integer LongTensor [T] / [1, T] -> list[int] (non-empty); float ids are refused."""
    ids = prompt_tensor(prompt_ids)
    if ids.shape[0] != 1:
        raise ValueError(f"prompt_ids must be [T] or [1, T] (batch size 1), got shape {tuple(ids.shape)}")
    return ids[0].tolist()
