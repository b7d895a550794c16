from collections.abc import Callable

import torch


def eagle2_tree(root: int, next_logprobs: Callable[[list[int]], torch.Tensor], depth: int, top_k: int,
                total_tokens: int) -> tuple[list[int], list[int]]:
    """-> (tokens [total_tokens + 1], parents) of the reranked draft tree."""
    raise NotImplementedError("expand, then rerank")
