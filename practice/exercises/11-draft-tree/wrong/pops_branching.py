"""Consumes the caller's branching list with pop(0), one level at a time."""
import torch


def build_tree(drafter, context, root, branching):
    tokens, parents, frontier = [root], [-1], [0]
    while branching:
        width = branching.pop(0)
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, frontier)
        next_frontier = []
        for node, kids in zip(frontier, logits.topk(width, dim=-1).indices.tolist()):
            for token in kids:
                next_frontier.append(len(tokens))
                tokens.append(token)
                parents.append(node)
        frontier = next_frontier
    return tokens, parents
