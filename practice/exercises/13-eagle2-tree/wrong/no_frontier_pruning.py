"""Expands every node created in a step instead of the top_k by score."""
import torch


def eagle2_tree(root, next_logprobs, depth, top_k, total_tokens):
    tokens, parents, scores, paths = [root], [-1], [0.0], [[root]]
    frontier = [0]
    for _ in range(depth):
        new = []
        for node in frontier:
            values, ids = torch.sort(next_logprobs(paths[node]), descending=True, stable=True)
            for lp, tok in zip(values[:top_k].tolist(), ids[:top_k].tolist()):
                new.append(len(tokens))
                tokens.append(tok)
                parents.append(node)
                scores.append(scores[node] + lp)
                paths.append(paths[node] + [tok])
        frontier = new
    kept = sorted(sorted(range(1, len(tokens)), key=lambda i: -scores[i])[:total_tokens])
    order = [0] + kept
    index = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [-1] + [index[parents[i]] for i in kept]
