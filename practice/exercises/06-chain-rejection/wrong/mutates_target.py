"""Builds the residual in place, inside the caller's target_probs."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, x in enumerate(draft_tokens):
        if torch.rand((), generator=generator).item() * draft_probs[i, x].item() >= target_probs[i, x].item():
            fix = target_probs[i].sub_(draft_probs[i]).clamp_(min=0)
            return i, int(torch.multinomial(fix / fix.sum(), 1, generator=generator))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[k], 1, generator=generator))
