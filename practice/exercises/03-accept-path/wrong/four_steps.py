"""Searches the accepted nodes level by level, 4 levels only (a fixed loop): deeper paths are cut short."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    predicted = target_logits.argmax(-1).tolist()
    level, deepest = [0], 0
    for _ in range(4):
        level = [c for c in range(1, len(parents)) if parents[c] in level and tokens[c] == predicted[parents[c]]]
        if not level:
            break
        deepest = level[0]
    path = [deepest]
    while path[-1] != 0:
        path.append(parents[path[-1]])
    return path[::-1]
