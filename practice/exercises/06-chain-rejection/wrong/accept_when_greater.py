"""Accepts a draft deterministically when target >= draft, instead of with probability min(1, target/draft)."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, x in enumerate(draft_tokens):
        if target_probs[i, x] < draft_probs[i, x]:
            fix = (target_probs[i] - draft_probs[i]).clamp_min(0)
            return i, int(torch.multinomial(fix / fix.sum(), 1, generator=generator))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[k], 1, generator=generator))
