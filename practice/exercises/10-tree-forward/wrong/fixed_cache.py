"""Allocates a cache of a fixed 64 slots, too small for a long prefix."""
import torch

from tree_spec import positions, tree_mask


def tree_logits(model, prefix, tokens, parents):
    device = model.device
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=64)
        model(torch.tensor([prefix], device=device), cache=cache)
        return model(torch.tensor([tokens], device=device), cache=cache,
                     positions=positions(parents, len(prefix), device), mask=tree_mask(parents, device))[0]
