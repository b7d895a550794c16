"""Prepends the root's level (1) to the caller's branching list."""
import math


def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    branching.insert(0, 1)
    nodes = sum(math.prod(branching[: i + 1]) for i in range(1, len(branching)))
    return nodes, batch * (nodes + 1)
