"""Calls the drafter for the root before the loop, so an empty branching still costs a call."""
import torch


def build_tree(drafter, context, root, branching):
    tokens, parents, frontier = [root], [-1], [0]
    with torch.inference_mode():
        logits = drafter.next_logits(context, tokens, parents, frontier)
    for level, width in enumerate(branching):
        if level > 0:
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
