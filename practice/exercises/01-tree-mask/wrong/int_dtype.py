"""Returns an integer mask instead of torch.bool."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.long)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] = mask[parent]
        mask[i, i] = 1
    return mask
