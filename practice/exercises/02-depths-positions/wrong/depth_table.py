"""Looks depths up in a table built for trees of at most 4 levels (deeper nodes get depth 4)."""
import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    depths = [0] * len(parents)
    for i in range(1, len(parents)):
        depths[i] = min(depths[parents[i]] + 1, 4)
    return depths, torch.tensor([prefix_len + d for d in depths], dtype=torch.long)
