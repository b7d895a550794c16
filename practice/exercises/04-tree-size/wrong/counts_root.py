"""Counts the root among the drafted nodes."""
def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    nodes, level = 1, 1
    for width in branching:
        level *= width
        nodes += level
    return nodes, batch * nodes
