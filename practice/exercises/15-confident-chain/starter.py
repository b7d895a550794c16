from tree_spec import Drafter


def confident_chain(drafter: Drafter, context: list[int], root: int, k: int, theta: float) -> tuple[list[int], list[int]]:
    """-> (tokens, parents) of the chain: tokens[0] = root, parents = [-1, 0, 1, ...]."""
    raise NotImplementedError("draft greedily while the path probability stays >= theta, at most k drafts")
