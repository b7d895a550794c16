import torch


def depths_and_positions(parents: list[int], prefix_len: int) -> tuple[list[int], torch.Tensor]:
    """-> (depths: list[int] [n], positions: LongTensor [n] = prefix_len + depth)."""
    raise NotImplementedError("compute depths and positions")
