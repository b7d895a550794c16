"""Gives the nodes sequence positions (prefix_len + index)."""
import torch

from tree_spec import tree_mask


def tree_logits(model, prefix, tokens, parents):
    device = model.device
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + len(tokens))
        model(torch.tensor([prefix], device=device), cache=cache)
        return model(torch.tensor([tokens], device=device), cache=cache, mask=tree_mask(parents, device))[0]
