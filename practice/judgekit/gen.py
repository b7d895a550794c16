"""Generated inputs for the exercises' differential cases: structured shapes and seeded random ones.

Everything here is deterministic (fixed seeds, Python's own `random.Random`), so the worker, the parent and
`record` see the same inputs. references.py hashes this file with each cases.py: changing it makes every
reference stale until `record` runs.
"""
from __future__ import annotations

import random

import torch

from tree_spec.core.topology import depths


def chain(n: int) -> list[int]:
    """A chain of n nodes: [-1, 0, 1, ..., n - 2]."""
    return [-1] + list(range(n - 1))


def star(n: int) -> list[int]:
    """A root with n - 1 children."""
    return [-1] + [0] * (n - 1)


def static_tree(branching: list[int]) -> list[int]:
    """The parents of a static tree, level by level, each frontier node's children together."""
    parents, frontier = [-1], [0]
    for width in branching:
        new = []
        for node in frontier:
            for _ in range(width):
                new.append(len(parents))
                parents.append(node)
        frontier = new
    return parents


def random_tree(n: int, seed: int, depth_bias: float = 0.0, levels: int | None = None) -> list[int]:
    """n nodes, each attached to a uniformly random earlier node, or (with probability depth_bias) to the node
    just before it, which makes deep, thin trees. levels: the tree is exactly this deep, by construction: a
    spine of `levels` nodes at random ids reaches it, and no other node goes deeper."""
    rng = random.Random(seed)
    if levels is None:
        return [-1] + [i - 1 if rng.random() < depth_bias else rng.randrange(i) for i in range(1, n)]
    if not 0 <= levels < n:
        raise ValueError(f"a tree of {n} nodes is 0 to {n - 1} levels deep, not {levels}")
    spine = sorted(rng.sample(range(1, n), levels))
    parents, depth = [-1], [0]
    for i in range(1, n):
        if i in spine:
            parent = spine[spine.index(i) - 1] if spine.index(i) else 0
        else:
            shallow = [j for j in range(i) if depth[j] < levels]
            parent = i - 1 if rng.random() < depth_bias and depth[i - 1] < levels else rng.choice(shallow)
        parents.append(parent)
        depth.append(depth[parent] + 1)
    return parents


DEEPEST = 22  # levels of the deepest generated tree: what the READMEs promise ("up to 70 nodes and 22 levels")


def tree_suite(seed: int) -> list[tuple[str, list[int]]]:
    """(name, parents): a single node, a deep chain, a wide star, a static [3, 3, 2] tree, random trees (one
    deeper than 4 levels, one of 70 nodes DEEPEST levels deep: longer than any small fixed buffer, deeper than
    any small fixed number of parent hops)."""
    return [
        ("single node", [-1]),
        ("deep chain of 9", chain(9)),
        ("wide star of 12", star(12)),
        ("static [3, 3, 2] tree", static_tree([3, 3, 2])),
        ("random tree of 12", random_tree(12, seed)),
        ("deep random tree of 20", random_tree(20, seed + 1, depth_bias=0.7)),
        (f"random tree of 70, {DEEPEST} levels", random_tree(70, seed + 2, depth_bias=0.3, levels=DEEPEST)),
    ]


def deepest_path(parents: list[int]) -> list[int]:
    """The root path (node ids, root first) to the deepest node, the lowest id among equally deep ones."""
    depth = depths(parents)
    path = [depth.index(max(depth))]
    while path[-1] > 0:
        path.append(parents[path[-1]])
    return path[::-1]


def strided(x: torch.Tensor, layout: str) -> torch.Tensor:
    """x's values in a non-contiguous layout: "transposed" (dims 0 and 1 swapped in memory, dense) or "sliced"
    (every other slot of a twice as long dim 0, not dense). A copy the caller owns; x is left as it is."""
    if layout == "transposed":
        return x.transpose(0, 1).contiguous().transpose(0, 1)
    if layout == "sliced":
        wide = torch.zeros(2 * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
        wide[::2] = x
        return wide[::2]
    raise ValueError(f"unknown layout {layout!r}")
