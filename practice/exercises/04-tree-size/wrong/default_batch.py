"""Defaults batch to 64 (a serving batch) instead of 1."""


def tree_size(branching: list[int], batch: int = 64) -> tuple[int, int]:
    nodes, level = 0, 1
    for width in branching:
        level *= width
        nodes += level
    return nodes, batch * (nodes + 1)
