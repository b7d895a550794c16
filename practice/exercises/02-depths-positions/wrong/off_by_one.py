"""Puts the root at prefix_len + 1 instead of prefix_len."""
import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    depths = [0] * len(parents)
    for i in range(1, len(parents)):
        depths[i] = depths[parents[i]] + 1
    return depths, torch.tensor(depths) + prefix_len + 1
