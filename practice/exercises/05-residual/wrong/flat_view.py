"""Flattens the leading dims with .view(-1, V), which only works on contiguous memory."""
import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    vocab = target_probs.shape[-1]
    target, draft = target_probs.view(-1, vocab), draft_probs.view(-1, vocab)
    excess = (target - draft).clamp_min(0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(1e-30), target).view(target_probs.shape)
