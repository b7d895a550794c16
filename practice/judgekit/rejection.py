"""Recursive rejection over a tree's children (SpecInfer/EAGLE), exactly: the sampler with its modelled mistakes as
flags, the exact law of its outcomes on one fixed tree, and the exact law of a drafted tree shape (exercise 07).

Flags (all defaults: the right rule): update_p (p <- residual after a rejection), update_q (q loses the rejected
token), final_from_p (every child rejected: the next token from the final p, not target_probs[node]), renormalize
(the residual is a distribution), siblings (try every child, not only the first), original_q (the residual against
the original draft row instead of the current q), final_residual (one residual too many after the last rejection).
references.py hashes this file with each cases.py.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from itertools import permutations
from typing import Any

import torch

from tree_spec.core.topology import children, depths

RIGHT = {"update_p": True, "update_q": True, "final_from_p": True, "renormalize": True, "siblings": True,
         "original_q": False, "final_residual": False}


def residual(p: torch.Tensor, q: torch.Tensor, normalize: bool = True) -> torch.Tensor:
    """norm(max(0, p - q)); p itself where that is all zero."""
    x = (p - q).clamp_min(0)
    if x.sum() <= 0:
        return p
    return x / x.sum() if normalize else x


def _final(p: torch.Tensor, p0: torch.Tensor, q: torch.Tensor, flags: dict[str, bool]) -> torch.Tensor:
    """The distribution of the next token after every child was rejected, under `flags`."""
    last = (p if flags["final_from_p"] else p0) if flags["update_p"] else residual(p, q)
    return residual(last, q) if flags["final_residual"] else last


def _rejected(p: torch.Tensor, q: torch.Tensor, q0: torch.Tensor, x: int, flags: dict[str, bool]
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(p, q) after child token x was rejected, under `flags`."""
    if flags["update_p"]:
        p = residual(p, q0 if flags["original_q"] else q, flags["renormalize"])
    if flags["update_q"]:
        q = q.clone()
        q[x] = 0
        q = q / q.sum()
    return p, q


def verify(tokens: Sequence[int], parents: Sequence[int], draft_probs: torch.Tensor, target_probs: torch.Tensor,
           generator: torch.Generator, **flags: bool) -> tuple[list[int], int]:
    """verify_tree with the rule's `flags` (defaults: the right rule), drawing from `generator` as the solution."""
    flags = {**RIGHT, **flags}
    path, kids_of = [0], children(list(parents))
    while True:
        node = path[-1]
        kids = kids_of[node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p0, q0 = target_probs[node], draft_probs[node]
        p, q = p0, q0.clone()
        for child in (kids if flags["siblings"] else kids[:1]):
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            p, q = _rejected(p, q, q0, x, flags)
        else:
            return path, int(torch.multinomial(_final(p, p0, q, flags), 1, generator=generator))


def outcome_law(tokens: Sequence[int], parents: Sequence[int], draft_probs: torch.Tensor, target_probs: torch.Tensor
                ) -> dict[tuple[tuple[int, ...], int], float]:
    """The exact law of verify_tree's outcome (accepted path, next token) on ONE fixed tree, under the right rule."""
    kids_of, law = children(list(parents)), {}
    target, draft = target_probs.double(), draft_probs.double()

    def walk(path: tuple[int, ...], reach: float) -> None:
        node = path[-1]
        if not kids_of[node]:
            for t, prob in enumerate(target[node].tolist()):
                law[path, t] = law.get((path, t), 0.0) + reach * prob
            return
        p0, q0 = target[node], draft[node]
        p, q = p0, q0.clone()
        for child in kids_of[node]:
            x = tokens[child]
            accept = min(1.0, float(p[x] / q[x])) if q[x] > 0 else 1.0
            walk(path + (child,), reach * accept)
            reach *= 1 - accept
            p, q = _rejected(p, q, q0, x, RIGHT)
        for t, prob in enumerate((p / p.sum()).tolist()):
            law[path, t] = law.get((path, t), 0.0) + reach * prob

    walk((0,), 1.0)
    return {k: v for k, v in law.items() if v > 0}


def shape_law(parents: Sequence[int], draft: torch.Tensor, target: torch.Tensor, root: int,
              depth_flags: Callable[[int], dict[str, bool]] = lambda depth: {}) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact laws (emitted sequences [V**(D+1)], accepted lengths [D+1]) of recursive rejection on a drafted tree of
    this shape: every node's children drawn without replacement from its draft row, draft [D, V, V] and target
    [D + 1, V, V] indexed [depth, token of the node], the emitted tokens completed to D + 1 from the target rows.
    It enumerates each node's ordered children and recurses into them (a child's subtree is drafted independently
    given its token). depth_flags(depth) -> the flags that hold at that depth (defaults: the right rule)."""
    parents, depth = list(parents), depths(list(parents))
    draft, target, deepest, V = draft.double(), target.double(), max(depth), target.shape[-1]
    kids = children(parents)

    @cache
    def markov(d: int, token: int) -> torch.Tensor:  # the target's law of the tokens after a node at depth d
        row = target[d, token]
        return row if d == deepest else torch.stack([row[a] * markov(d + 1, a) for a in range(V)])

    @cache
    def node_law(node: int, token: int) -> tuple[torch.Tensor, torch.Tensor]:
        d = depth[node]
        seq = torch.zeros([V] * (deepest - d + 1), dtype=torch.float64)
        lengths = torch.zeros(deepest - d + 1, dtype=torch.float64)
        if not kids[node]:
            lengths[0] = 1
            return markov(d, token), lengths
        flags = {**RIGHT, **depth_flags(d)}
        p0, q0 = target[d, token], draft[d, token]
        for order in permutations(range(V), len(kids[node])):
            q, reach = q0.clone(), 1.0
            for x in order:  # probability of drawing this ordered set without replacement
                reach *= float(q[x] / q.sum())
                q[x] = 0
            p, q = p0.clone(), q0.clone()
            tried = list(zip(kids[node], order))
            for kid, x in (tried if flags["siblings"] else tried[:1]):
                accept = min(1.0, float(p[x] / q[x]))
                kid_seq, kid_lengths = node_law(kid, x)
                seq[x] += reach * accept * kid_seq
                lengths[1:1 + len(kid_lengths)] += reach * accept * kid_lengths
                reach *= 1 - accept
                p, q = _rejected(p, q, q0, x, flags)
            last = _final(p, p0, q, flags)
            seq += reach * torch.stack([last[a] / last.sum() * markov(d + 1, a) for a in range(V)])
            lengths[0] += reach
        return seq, lengths

    seq, lengths = node_law(0, root)
    return seq.flatten(), lengths


def outcome_counts(runs: Sequence[tuple[list[int], int]]) -> list[list[Any]]:
    """[[path, next token, count], ...] of (path, next token) runs, for the wire (no tuple keys)."""
    counts: dict[tuple[tuple[int, ...], int], int] = {}
    for path, token in runs:
        key = (tuple(path), token)
        counts[key] = counts.get(key, 0) + 1
    return [[list(path), token, n] for (path, token), n in sorted(counts.items())]
