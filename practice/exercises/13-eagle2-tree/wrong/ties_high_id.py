"""Breaks rerank ties toward the higher node id."""
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
    ranked = sorted(range(1, len(tokens)), key=lambda i: scores[i])[::-1]  # reversed ascending sort: ties go to the later id
    order = [0] + sorted(ranked[:total_tokens])
    new_id = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [-1] + [new_id[parents[i]] for i in order[1:]]
