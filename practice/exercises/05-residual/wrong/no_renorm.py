"""Returns max(0, target - draft) without renormalizing it."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    excess = torch.clamp(target_probs - draft_probs, min=0)
    return torch.where(excess.sum(-1, keepdim=True) > 0, excess, target_probs)
