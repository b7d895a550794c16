"""Reranks ascending and keeps the slice [-total_tokens:], which keeps every node when total_tokens = 0."""
import torch


def eagle2_tree(root, next_logprobs, depth, top_k, total_tokens):
    tokens, parents, scores, paths = [root], [-1], [0.0], [[root]]
    frontier = [0]
    for _ in range(depth):
        created = []
        for node in frontier:
            values, ids = torch.sort(next_logprobs(paths[node]), descending=True, stable=True)
            for logprob, token in zip(values[:top_k].tolist(), ids[:top_k].tolist()):
                created.append(len(tokens))
                tokens.append(token)
                parents.append(node)
                scores.append(scores[node] + logprob)
                paths.append(paths[node] + [token])
        frontier = sorted(created, key=lambda i: -scores[i])[:top_k]
    kept = sorted(range(1, len(tokens)), key=lambda i: (scores[i], -i))[-total_tokens:]
    order = [0] + sorted(kept)
    new_id = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [-1] + [new_id[parents[i]] for i in order[1:]]
