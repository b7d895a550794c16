import torch


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """[V], [V] -> norm(max(0, target - draft)); the target itself where that is all zero."""
    excess = (target_probs - draft_probs).clamp_min(0)
    mass = excess.sum()
    return excess / mass if mass > 0 else target_probs


def verify_chain(draft_tokens: list[int], draft_probs: torch.Tensor, target_probs: torch.Tensor,
                 generator: torch.Generator) -> tuple[int, int]:
    """draft_probs [k, V], target_probs [k + 1, V] -> (n_accepted, next_token)."""
    for i, x in enumerate(draft_tokens):
        u = torch.rand((), generator=generator).item()
        if u * draft_probs[i, x].item() >= target_probs[i, x].item():
            fix = residual(target_probs[i], draft_probs[i])
            return i, int(torch.multinomial(fix, 1, generator=generator))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[k], 1, generator=generator))
