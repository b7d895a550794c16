"""A plain causal (lower-triangular) mask: every node sees all earlier nodes."""
import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    return torch.tril(torch.ones(n, n)).bool()
