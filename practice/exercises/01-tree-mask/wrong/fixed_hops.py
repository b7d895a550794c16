"""Closes the ancestor relation with a fixed 14 parent hops, enough only for trees up to 14 levels deep."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    up = torch.tensor([max(p, 0) for p in parents], dtype=torch.long)
    rows = torch.arange(n)
    mask = torch.eye(n, dtype=torch.bool)
    node = up
    for _ in range(14):  # one more ancestor per round; the root points at itself
        mask[rows, node] = True
        node = up[node]
    return mask
