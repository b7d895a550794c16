"""Counts the root in total_tokens."""
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
        frontier = sorted(new, key=lambda i: scores[i], reverse=True)[:top_k]
    order = sorted(sorted(range(len(tokens)), key=lambda i: -scores[i])[:total_tokens])
    index = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [index.get(parents[i], -1) for i in order]
