"""Replaces parents[0] = -1 by 0 in the caller's list to avoid the root's special case."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    parents[0] = 0
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(1, n):
        mask[i] = mask[parents[i]]
    mask[range(n), range(n)] = True
    return mask
