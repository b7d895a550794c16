import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    """Bool [n, n]: mask[i, j] is True iff node j is node i itself or one of its ancestors."""
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] = mask[parent]
        mask[i, i] = True
    return mask
