"""Takes max(0, draft - target): target and draft swapped."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    excess = torch.clamp(draft_probs - target_probs, min=0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(1e-30), target_probs)
