"""Counts at most 14 parent hops per node, enough only for trees up to 14 levels deep."""
import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    depths = []
    for i in range(len(parents)):
        depth, node = 0, i
        for _ in range(14):
            if parents[node] < 0:
                break
            node, depth = parents[node], depth + 1
        depths.append(depth)
    return depths, torch.tensor([prefix_len + d for d in depths], dtype=torch.long)
