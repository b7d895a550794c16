import torch

from mini_llm import Transformer


def tree_logits(model: Transformer, prefix: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """Logits [n, V] of every tree node after `prefix`: one prefill forward, then ONE forward over the tree."""
    raise NotImplementedError("prefill, then verify the tree in one forward")
