"""Marks the ancestors but not the node itself (no diagonal)."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(1, n):
        mask[i] = mask[parents[i]]
        mask[i, parents[i]] = True
    return mask
