"""Divides by a zero mass on rows where target == draft (NaN)."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    excess = torch.clamp(target_probs - draft_probs, min=0)
    return excess / excess.sum(-1, keepdim=True)
