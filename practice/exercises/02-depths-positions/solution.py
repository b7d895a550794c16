import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    """-> (depths: list[int] [n], positions: LongTensor [n] = prefix_len + depth)."""
    depths = [0] * len(parents)
    for i in range(1, len(parents)):
        depths[i] = depths[parents[i]] + 1
    return depths, torch.tensor([prefix_len + d for d in depths], dtype=torch.long)
