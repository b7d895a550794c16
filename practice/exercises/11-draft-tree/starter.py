from tree_spec import Drafter


def build_tree(drafter: Drafter, context: list[int], root: int, branching: list[int]) -> tuple[list[int], list[int]]:
    """-> (tokens, parents) in the package's representation: node 0 = root, parents[0] == -1, parents[i] < i."""
    raise NotImplementedError("grow the tree level by level")
