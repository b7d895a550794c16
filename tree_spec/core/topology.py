"""Token-tree topology: parent lists, children, depths, depth positions and the tree attention mask.

A tree is `tokens: list[int]` and `parents: list[int]`; node 0 is the root, `parents[0] == -1` and
`parents[i] < i` (a parent comes before its children). Re-exported by `tree_spec.tree`.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def validate_parents(parents: Sequence[int]) -> None:
    """Raise ValueError naming the problem unless `parents` describes a tree rooted at node 0."""
    if len(parents) == 0:
        raise ValueError("parents is empty: a tree needs at least the root (parents = [-1])")
    if parents[0] != -1:
        raise ValueError(f"wrong root: parents[0] must be -1 (node 0 is the root), got {parents[0]}")
    for i in range(1, len(parents)):
        if parents[i] >= i:
            raise ValueError(f"parents[{i}] = {parents[i]} >= {i}: a parent must come before its child")
        if parents[i] < 0:
            raise ValueError(f"parents[{i}] = {parents[i]}: only node 0 (the root) may have no parent")


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of every node: the root has depth 0, a child one more than its parent."""
    validate_parents(parents)
    d = [0] * len(parents)
    for i in range(1, len(parents)):
        d[i] = d[parents[i]] + 1
    return d


def children(parents: Sequence[int]) -> list[list[int]]:
    """children[i] = the ids of node i's children, in index order."""
    validate_parents(parents)
    kids: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        kids[parents[i]].append(i)
    return kids


def positions(parents: Sequence[int], prefix_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Rotary positions [n] of the nodes: prefix_len + depth (siblings share a position)."""
    if prefix_len < 0:
        raise ValueError(f"prefix_len must be >= 0 (the number of tokens before the root), got {prefix_len}")
    return torch.tensor([prefix_len + d for d in depths(parents)], dtype=torch.long, device=device)


def tree_mask(parents: Sequence[int], device: torch.device | str | None = None) -> torch.Tensor:
    """Bool [n, n]: mask[i, j] is True iff node j is node i itself or one of its ancestors."""
    validate_parents(parents)
    rows: list[list[bool]] = []
    for i, p in enumerate(parents):
        row = list(rows[p]) if p >= 0 else [False] * len(parents)
        row[i] = True
        rows.append(row)
    return torch.tensor(rows, dtype=torch.bool, device=device)


def ancestor_mask(parents: torch.Tensor, depth: int) -> torch.Tensor:
    """`tree_mask` on tensors, no host read: parents [n] (parents[0] = -1) of a tree at most `depth` levels deep
    -> bool [n, n]. Each of `depth` rounds marks one more ancestor of every node (the root stays at itself)."""
    n = parents.shape[0]
    rows = torch.arange(n, device=parents.device)
    mask = torch.eye(n, dtype=torch.bool, device=parents.device)
    up = parents.clamp_min(0)
    node = up
    for _ in range(depth):
        mask[rows, node] = True
        node = up[node]
    return mask


def tree_node_count(branching: Sequence[int]) -> int:
    """Drafted nodes of a tree (root excluded): w1 + w1*w2 + ... ; [2, 2, 1, 1] -> 14, [3, 3, 2] -> 30."""
    count, width = 0, 1
    for w in branching:
        if w < 1:
            raise ValueError(f"every branching factor must be >= 1, got {list(branching)}")
        width *= w
        count += width
    return count
