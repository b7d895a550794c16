"""Draws from a generator of its own, seeded once at import, ignoring the `generator` it is given."""
import torch

_mine = torch.Generator().manual_seed(1234)


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, x in enumerate(draft_tokens):
        if torch.rand((), generator=_mine).item() * draft_probs[i, x].item() >= target_probs[i, x].item():
            fix = (target_probs[i] - draft_probs[i]).clamp_min(0)
            return i, int(torch.multinomial(fix / fix.sum(), 1, generator=_mine))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[k], 1, generator=_mine))
