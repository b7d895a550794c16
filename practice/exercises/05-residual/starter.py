import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """[..., V], [..., V] -> norm(max(0, target - draft)) over the last dim, [..., V], same dtype."""
    raise NotImplementedError("compute the residual distribution")
