"""Accepts with probability min(1, draft / target), the ratio inverted."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, token in enumerate(draft_tokens):
        ratio = draft_probs[i, token] / target_probs[i, token]
        if torch.rand((), generator=generator).item() >= ratio.item():
            excess = torch.clamp(target_probs[i] - draft_probs[i], min=0)
            return i, int(torch.multinomial(excess / excess.sum(), 1, generator=generator))
    return len(draft_tokens), int(torch.multinomial(target_probs[-1], 1, generator=generator))
