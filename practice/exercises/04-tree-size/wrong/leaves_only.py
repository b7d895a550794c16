"""Counts the last level (the leaves) only."""
def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    nodes = 1
    for width in branching:
        nodes *= width
    return nodes, batch * (nodes + 1)
