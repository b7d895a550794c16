import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """[..., V], [..., V] -> norm(max(0, target - draft)) over the last dim, [..., V], same dtype."""
    excess = (target_probs - draft_probs).clamp_min(0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(1e-30), target_probs)
