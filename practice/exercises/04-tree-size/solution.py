def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    """-> (drafted nodes, root excluded; tokens the target verifies for the batch = batch * (nodes + 1))."""
    nodes, level = 0, 1
    for width in branching:
        level *= width
        nodes += level
    return nodes, batch * (nodes + 1)
