import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    n = len(parents)
    return torch.tril(torch.ones(n, n)).bool()
