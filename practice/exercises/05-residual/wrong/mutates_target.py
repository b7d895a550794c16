"""Computes the positive part in place, inside the caller's target_probs."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    original = target_probs.clone()
    excess = target_probs.sub_(draft_probs).clamp_(min=0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(1e-30), original)
