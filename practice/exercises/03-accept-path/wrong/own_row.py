"""Checks a child against its own row of target_logits instead of its parent's."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    path = [0]
    for i in range(1, len(tokens)):
        if parents[i] == path[-1] and tokens[i] == int(target_logits[i].argmax()):
            path.append(i)
    return path
