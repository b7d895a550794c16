"""Walks down into the first child whose token matches, never looking at a sibling with the same token."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    children: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    predicted = target_logits.argmax(-1).tolist()
    path = [0]
    while True:
        node = path[-1]
        match = next((c for c in children[node] if tokens[c] == predicted[node]), None)
        if match is None:
            return path
        path.append(match)
