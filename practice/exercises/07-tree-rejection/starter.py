import torch


def verify_tree(tokens: list[int], parents: list[int], draft_probs: torch.Tensor,
                target_probs: torch.Tensor, generator: torch.Generator) -> tuple[list[int], int]:
    """draft_probs, target_probs [n, V] -> (accepted path as node ids from 0, next_token)."""
    raise NotImplementedError("recursive rejection over the children")
