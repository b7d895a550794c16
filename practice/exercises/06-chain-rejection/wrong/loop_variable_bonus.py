"""Takes n_accepted from the loop variable after the loop, which does not exist when there are no drafts."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, x in enumerate(draft_tokens):
        if torch.rand((), generator=generator).item() * draft_probs[i, x].item() >= target_probs[i, x].item():
            fix = (target_probs[i] - draft_probs[i]).clamp_min(0)
            return i, int(torch.multinomial(fix / fix.sum(), 1, generator=generator))
    return i + 1, int(torch.multinomial(target_probs[i + 1], 1, generator=generator))
