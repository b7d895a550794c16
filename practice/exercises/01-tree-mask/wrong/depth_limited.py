"""Walks at most 4 levels up, so deep nodes miss their far ancestors."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    mask = torch.eye(n, dtype=torch.bool)
    for i in range(n):
        node = parents[i]
        for _ in range(4):
            if node < 0:
                break
            mask[i, node] = True
            node = parents[node]
    return mask
