"""Picks the frontier by score but expands it in node-id order."""
from collections.abc import Callable

import torch


def eagle2_tree(root: int, next_logprobs: Callable[[list[int]], torch.Tensor], depth: int, top_k: int,
                total_tokens: int) -> tuple[list[int], list[int]]:
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
        frontier = sorted(sorted(created, key=lambda i: -scores[i])[:top_k])
    kept = sorted(range(1, len(tokens)), key=lambda i: (-scores[i], i))[:total_tokens]
    order = [0] + sorted(kept)
    new_id = {old: new for new, old in enumerate(order)}
    return [tokens[i] for i in order], [-1] + [new_id[parents[i]] for i in order[1:]]
