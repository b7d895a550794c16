"""Orders a level's new nodes rank-major (every frontier node's best child, then every second-best, ...)."""
import torch


def build_tree(drafter, context, root, branching):
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        with torch.inference_mode():
            kids = drafter.next_logits(context, tokens, parents, frontier).topk(width, dim=-1).indices.tolist()
        new = []
        for rank in range(width):
            for node, row in zip(frontier, kids):
                new.append(len(tokens))
                tokens.append(row[rank])
                parents.append(node)
        frontier = new
    return tokens, parents
