"""Overwrites the caller's parents with the depths, reusing the list as storage."""
import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    depths = parents
    for i, parent in enumerate(parents):
        depths[i] = 0 if parent < 0 else depths[parent] + 1
    return list(depths), torch.tensor([prefix_len + d for d in depths], dtype=torch.long)
