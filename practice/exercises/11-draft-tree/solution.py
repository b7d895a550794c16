import torch

from tree_spec import Drafter


def build_tree(drafter: Drafter, context: list[int], root: int, branching: list[int]) -> tuple[list[int], list[int]]:
    """-> (tokens, parents) in the package's representation: node 0 = root, parents[0] == -1, parents[i] < i."""
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, frontier)
        children = logits.topk(width, dim=-1).indices.tolist()
        next_frontier = []
        for node, kids in zip(frontier, children):
            for token in kids:
                next_frontier.append(len(tokens))
                tokens.append(token)
                parents.append(node)
        frontier = next_frontier
    return tokens, parents
