"""Growing draft trees from a level-wise drafter: a fixed branching shape, or EAGLE-2's dynamic expansion.

A level-wise drafter answers one question, `next_logits(context, tokens, parents, frontier)`: its logits after
every frontier node of the tree drafted so far. Both builders ask once per tree level: sampled growth for the
logits, greedy growth for the best children only (`next_top` where the drafter has it, else `top_children` of
the logits), which a drafter with a reduced vocabulary answers without full-vocabulary logits.

EAGLE-2 expansion (`build_dynamic_tree`): at each of `depth` levels, the `width` nodes of the newest level with
the highest cumulative draft log-probability (the product of draft probabilities along the path, EAGLE-2's
estimate of the chance that the target accepts the path) each get `width` children. With `min_path_prob` > 0
the expansion stops early once those `width` nodes' path probabilities sum below it (Dynamic Depth Decoding,
Brown et al. 2024): the draft expects the accepted path to end before them. Reranking: of all candidates, keep
the `total_tokens` with the highest cumulative log-probability. A child never scores above its
parent and greedy siblings come in descending order, so the kept set is a valid tree. Verification is
unchanged, so greedy output stays identical to plain decoding.

Under sampling, children are drawn without replacement from the draft distribution. `verify_tree` stays exact if
whether a drawn child is kept never depends on its own value (or its subtree's): so a child's score is its
parent's plus the log of the j-th largest draft probability (j = its draw rank), which equals its own
log-probability in the greedy case, and the kept children of every node are a prefix of its draw order (a node
becomes eligible once its parent and previous sibling are kept; its descendants only after itself). The early
stop reads the same scores, so whether a node gets children never depends on its children's values.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from mini_llm.generate import as_int

from .contracts import (
    GREEDY, NO_TRACE, Branching, DraftRequest, DraftTree, DynamicShape, LevelDrafter, SamplingParams, Trace,
)
from .proposal import check_level_logits, check_rows_drawable
from .topology import depths


@torch.inference_mode()
def grow(drafter: LevelDrafter, request: DraftRequest) -> DraftTree:
    """The tree `request` asks for, grown with a level-wise drafter (what `Drafter.propose` does by default).
    The request's shape was validated when it was made, so it is not checked again."""
    shape = request.shape.cut(request.max_depth)
    if isinstance(shape, Branching):
        return _grow_branching(drafter, request.context, request.root, shape.widths, request.sampling,
                               shape.min_path_prob, request.trace)
    return _grow_dynamic(drafter, request.context, request.root, shape.depth, shape.width, shape.total_tokens,
                         request.sampling, shape.min_path_prob, request.trace)


def top_children(logits: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft logits [n, V] -> the `width` most likely children of each row: token ids [n, w] and their draft
    log-probabilities [n, w] (fp32), best first (w = min(width, V)). What greedy tree growth keeps of a level."""
    top = torch.log_softmax(logits.float(), dim=-1).topk(min(width, logits.shape[-1]), dim=-1)
    return top.indices, top.values


def checked_logits(drafter: LevelDrafter, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int],
                   frontier: Sequence[int]) -> torch.Tensor:
    """`drafter.next_logits(...)`, refused unless it is [len(frontier), V] (`check_level_logits`)."""
    return check_level_logits(drafter, drafter.next_logits(context, tokens, parents, frontier), frontier)


def default_next_top(drafter: LevelDrafter, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int],
                     frontier: Sequence[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`top_children` of the drafter's checked logits: the best children [len(frontier), w] of a drafter that does not
    pick them itself (`Drafter.next_top`'s default)."""
    return top_children(checked_logits(drafter, context, tokens, parents, frontier), width)


def _level_probs(drafter: LevelDrafter, context: Sequence[int], tokens: list[int], parents: list[int],
                 frontier: list[int], sampling: SamplingParams, trace: Trace) -> tuple[torch.Tensor, list[int]]:
    """One drafter call, sampled: the draft distributions [len(frontier), V] after each frontier node, and how many
    tokens each gives a chance (one host read); a row with none is refused (`check_rows_drawable`)."""
    with trace.span("draft_call", width=len(frontier)):
        probs = sampling.probs(checked_logits(drafter, context, tokens, parents, frontier))
    drawable = (probs > 0).sum(-1).tolist()
    check_rows_drawable(drafter, frontier, [n > 0 for n in drawable])
    return probs, drawable


def _level_top(drafter: LevelDrafter, context: Sequence[int], tokens: list[int], parents: list[int],
               frontier: list[int], width: int, trace: Trace) -> tuple[list[list[int]], list[list[float]]]:
    """One drafter call, greedy: the `width` best children of each frontier node and their draft log-probabilities,
    as lists [len(frontier)][w]. A drafter with `next_top` (every `Drafter`) picks them itself, e.g. over its
    reduced vocabulary; for any other, `default_next_top`. A node whose best child is not finite is refused."""
    with trace.span("draft_call", width=len(frontier)):
        pick = getattr(drafter, "next_top", None)
        if pick is None:
            ids, logp = default_next_top(drafter, context, tokens, parents, frontier, width)
        else:
            ids, logp = pick(context, tokens, parents, frontier, width)
        ids, logp = ids.tolist(), logp.tolist()
    if len(ids) != len(frontier):
        raise ValueError(f"{type(drafter).__name__}.next_top returned {len(ids)} rows for {len(frontier)} frontier "
                         "nodes: it must return one row per frontier node")
    check_rows_drawable(drafter, frontier, [bool(row) and math.isfinite(row[0]) for row in logp])
    return ids, logp


@torch.inference_mode()
def build_draft_tree(
    drafter: LevelDrafter,
    context: Sequence[int],
    root: int,
    branching: Sequence[int],
    sampling: SamplingParams = GREEDY,
    min_path_prob: float = 0.0,
    trace: Trace = NO_TRACE,
) -> DraftTree:
    """Grow a tree below `root` (the last committed token, after `context`), one drafter call per level.

    Each node at level l gets the drafter's top-w_l tokens (greedy), or w_l tokens sampled without
    replacement from its `sampling` distribution (fewer if it has fewer nonzero entries).
    `branching=[1] * k` drafts a chain.
    min_path_prob: a node whose path probability under the draft (the product of its ancestors' and its
    own draft probabilities) is below this gets no children, and the tree stops growing when no node
    may grow (EAGLE-2's confidence rule; a chain stops early). It reads only the draft's distribution, so
    verification stays lossless.
    """
    branching = Branching.of(branching, min_path_prob).widths
    return _grow_branching(drafter, context, root, branching, sampling, min_path_prob, trace)


def _grow_branching(drafter: LevelDrafter, context: Sequence[int], root: int, branching: tuple[int, ...],
                    sampling: SamplingParams, min_path_prob: float, trace: Trace) -> DraftTree:
    """`build_draft_tree` on arguments already validated."""
    tokens, parents, frontier = [int(root)], [-1], [0]
    path_prob = [1.0]
    draft_rows: list[tuple[int, torch.Tensor]] = []
    for width in branching:
        if not frontier:
            break
        if sampling.greedy:
            children, logp = _level_top(drafter, context, tokens, parents, frontier, width, trace)
            child_probs = [[math.exp(x) for x in row] for row in logp] if min_path_prob else None
        else:
            probs, drawable = _level_probs(drafter, context, tokens, parents, frontier, sampling, trace)  # [f, V]
            draft_rows += zip(frontier, probs)
            children = [torch.multinomial(p, min(width, n), replacement=False, generator=sampling.generator).tolist()
                        for p, n in zip(probs, drawable)]
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
    if sampling.greedy:
        return DraftTree(tokens, parents)
    draft_probs = torch.zeros(len(tokens), drafter.vocab_size, device=drafter.device)
    for node, p in draft_rows:
        draft_probs[node] = p
    return DraftTree(tokens, parents, draft_probs)


@torch.inference_mode()
def build_dynamic_tree(
    drafter: LevelDrafter,
    context: Sequence[int],
    root: int,
    depth: int = 5,
    width: int = 4,
    total_tokens: int = 24,
    sampling: SamplingParams = GREEDY,
    min_path_prob: float = 0.0,
    trace: Trace = NO_TRACE,
) -> DraftTree:
    """An EAGLE-2 tree below `root` with at most `total_tokens` draft nodes (exactly that many when the
    expansion produced enough candidates), at most `depth` deep. One drafter call per level.
    `sampling.top_k` truncates the draft distribution as everywhere else; the expansion width is `width`.
    min_path_prob > 0 stops the expansion early (`DynamicShape`)."""
    depth, width, total_tokens = as_int(depth, "depth"), as_int(width, "width"), as_int(total_tokens, "total_tokens")
    DynamicShape(depth, width, total_tokens, min_path_prob)  # validates them
    return _grow_dynamic(drafter, context, root, depth, width, total_tokens, sampling, min_path_prob, trace)


def _grow_dynamic(drafter: LevelDrafter, context: Sequence[int], root: int, depth: int, width: int, total_tokens: int,
                  sampling: SamplingParams, min_path_prob: float, trace: Trace) -> DraftTree:
    """`build_dynamic_tree` on arguments already validated."""
    tokens, parents, score, depth_of, rows = expand_candidates(drafter, context, root, depth if total_tokens else 0,
                                                               width, sampling, trace, min_path_prob)
    keep = [0] + [i + 1 for i in rerank_list(score[1:], depth_of[1:], total_tokens)]
    new_id = {old: new for new, old in enumerate(keep)}
    tree = DraftTree([tokens[i] for i in keep], [new_id[parents[i]] if i else -1 for i in keep])
    if not sampling.greedy:
        tree.draft_probs = torch.zeros(len(keep), drafter.vocab_size, device=drafter.device)
        for old, new in new_id.items():
            if old in rows:
                tree.draft_probs[new] = rows[old]
    return tree


def expand_candidates(
    drafter: LevelDrafter, context: Sequence[int], root: int, depth: int, width: int,
    sampling: SamplingParams = GREEDY, trace: Trace = NO_TRACE, min_path_prob: float = 0.0,
) -> tuple[list[int], list[int], list[float], list[int], dict[int, torch.Tensor]]:
    """EAGLE-2's expansion, before reranking: `depth` levels (fewer once the nodes to expand have a summed path
    probability below `min_path_prob`), the `width` best nodes of each level given `width` children -> every
    candidate's (tokens, parents, score, depth) with the root at index 0, and (sampling) the distribution [V] each
    expanded node's children were drawn from."""
    tokens, parents, score = [int(root)], [-1], [0.0]
    rows: dict[int, torch.Tensor] = {}
    frontier = [0]
    for _ in range(depth):
        if sum(math.exp(score[i]) for i in frontier) < min_path_prob:
            break
        if sampling.greedy:  # the top-width children and their log-probabilities
            picks, slot = _level_top(drafter, context, tokens, parents, frontier, width, trace)
        else:
            probs, drawable = _level_probs(drafter, context, tokens, parents, frontier, sampling, trace)  # [f, V]
            picks = [torch.multinomial(p, min(width, n), replacement=False, generator=sampling.generator).tolist()
                     for p, n in zip(probs, drawable)]
            rows.update(zip(frontier, probs))
            slot = probs.log().topk(min(width, probs.shape[-1]), dim=-1).values.tolist()
        level = []
        for r, (node, kids) in enumerate(zip(frontier, picks)):
            for rank, token in enumerate(kids):
                tokens.append(token)
                parents.append(node)
                score.append(score[node] + slot[r][rank])
                level.append(len(tokens) - 1)
        frontier = sorted(sorted(level, key=lambda i: -score[i])[:width])
    return tokens, parents, score, depths(parents), rows


TIE_BREAK = 1e-6  # subtracted per level from a candidate's score, so a child never ties its parent in `rerank`


def rerank_order(scores: torch.Tensor, depths: torch.Tensor) -> torch.Tensor:
    """Candidates [M] best first by EAGLE-2's reranking key (score, less TIE_BREAK per level; ties: lower index)."""
    return torch.sort(scores - TIE_BREAK * depths, descending=True, stable=True).indices


def rerank(scores: torch.Tensor, depths: torch.Tensor, total_tokens: int) -> torch.Tensor:
    """EAGLE-2's reranking, no host read: candidate scores [M] (cumulative draft log-probabilities) and depths [M]
    -> the indices [min(M, total_tokens)] of the best candidates (`rerank_order`'s first), ascending.

    Candidates must be numbered parents before children and siblings in draw order. A child scores below its
    parent (strictly, after the tie-break) and a sibling no higher than the one drawn before it (ties go to the
    lower index), so the kept set holds every kept node's parent and earlier siblings: it is a tree.
    """
    return rerank_order(scores, depths)[:total_tokens].sort().values


def rerank_list(scores: Sequence[float], depths: Sequence[int], total_tokens: int) -> list[int]:
    """`rerank` on host lists, for the list loops that hold the candidates as lists: the same keys (in float64),
    the same stable order (Python's sort is stable), so the same kept indices, ascending."""
    order = sorted(range(len(scores)), key=lambda i: -(scores[i] - TIE_BREAK * depths[i]))
    return sorted(order[:total_tokens])
