"""Draws the acceptance test's u from Python's `random` module instead of `generator`."""
import random

import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    for i, x in enumerate(draft_tokens):
        if random.random() * draft_probs[i, x].item() >= target_probs[i, x].item():
            fix = (target_probs[i] - draft_probs[i]).clamp_min(0)
            return i, int(torch.multinomial(fix / fix.sum(), 1, generator=generator))
    k = len(draft_tokens)
    return k, int(torch.multinomial(target_probs[k], 1, generator=generator))
