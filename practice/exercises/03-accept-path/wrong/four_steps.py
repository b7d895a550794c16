"""Descends at most 4 levels (a loop of fixed length), so deeper accepted paths are cut short."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    predicted = target_logits.argmax(-1).tolist()
    path = [0]
    for _ in range(4):
        node = path[-1]
        match = next((c for c in range(1, len(parents)) if parents[c] == node and tokens[c] == predicted[node]), None)
        if match is None:
            break
        path.append(match)
    return path
