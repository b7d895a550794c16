import torch


def tree_mask(parents: list[int]) -> torch.Tensor:
    """Bool [n, n]: mask[i, j] is True iff node j is node i itself or one of its ancestors."""
    raise NotImplementedError("build the tree attention mask")
