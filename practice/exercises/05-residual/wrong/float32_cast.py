"""Converts to float32, so float64 inputs come back as float32."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    target, draft = target_probs.float(), draft_probs.float()
    excess = (target - draft).clamp_min(0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(1e-30), target)
