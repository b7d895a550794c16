def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    """-> (drafted nodes, root excluded; tokens the target verifies for the batch = batch * (nodes + 1))."""
    raise NotImplementedError("count the nodes")
