"""Samples the replacement from the target row instead of the residual."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, token in enumerate(draft_tokens):
        ratio = target_probs[i, token] / draft_probs[i, token]
        if torch.rand((), generator=generator).item() > min(1.0, ratio.item()):
            return i, int(torch.multinomial(target_probs[i], 1, generator=generator))
    return len(draft_tokens), int(torch.multinomial(target_probs[-1], 1, generator=generator))
