"""Returns tensors instead of two ints."""
import torch


def verify_chain(draft_tokens, draft_probs, target_probs, generator):
    k = len(draft_tokens)
    return torch.tensor(k), torch.multinomial(target_probs[k], 1, generator=generator)
