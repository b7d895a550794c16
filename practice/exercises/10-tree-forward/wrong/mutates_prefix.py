"""Appends the tree's tokens to the caller's prefix list to build the full sequence."""
import torch

from tree_spec import positions, tree_mask


def tree_logits(model, prefix, tokens, parents):
    device = model.device
    n_prefix = len(prefix)
    prefix += tokens
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix))
        model(torch.tensor([prefix[:n_prefix]], device=device), cache=cache)
        return model(torch.tensor([prefix[n_prefix:]], device=device), cache=cache,
                     positions=positions(parents, n_prefix, device), mask=tree_mask(parents, device))[0]
