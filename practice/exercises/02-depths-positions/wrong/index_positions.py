"""Positions follow the node's index in the list, not its depth."""
import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    depths = [0] * len(parents)
    for i in range(1, len(parents)):
        depths[i] = depths[parents[i]] + 1
    return depths, prefix_len + torch.arange(len(parents))
