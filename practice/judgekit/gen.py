"""Generated inputs for the exercises' differential cases: structured shapes and seeded random ones.

Everything here is deterministic (fixed seeds, Python's own `random.Random`), so the worker, the parent and
`record` see the same inputs. references.py hashes this file with each cases.py: changing it makes every
reference stale until `record` runs.
"""
from __future__ import annotations

import random


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


def random_tree(n: int, seed: int, depth_bias: float = 0.0) -> list[int]:
    """n nodes, each attached to a uniformly random earlier node, or (with probability depth_bias) to the node
    just before it, which makes deep, thin trees."""
    rng = random.Random(seed)
    return [-1] + [i - 1 if rng.random() < depth_bias else rng.randrange(i) for i in range(1, n)]


def tree_suite(seed: int) -> list[tuple[str, list[int]]]:
    """(name, parents): a single node, a deep chain, a wide star, a static [3, 3, 2] tree, random trees (one
    deeper than 4 levels, one longer than any small fixed buffer)."""
    return [
        ("single node", [-1]),
        ("deep chain of 9", chain(9)),
        ("wide star of 12", star(12)),
        ("static [3, 3, 2] tree", static_tree([3, 3, 2])),
        ("random tree of 12", random_tree(12, seed)),
        ("deep random tree of 20", random_tree(20, seed + 1, depth_bias=0.7)),
        ("random tree of 70", random_tree(70, seed + 2, depth_bias=0.3)),
    ]


def depth_of(parents: list[int]) -> list[int]:
    """Depth of every node (root 0)."""
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return depth
