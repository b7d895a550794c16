import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    """target_logits [n, V] -> accepted path as node ids, starting with the root 0."""
    raise NotImplementedError("walk down the tree")
