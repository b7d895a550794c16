"""Runs the tree without its mask (causal attention)."""
import torch

from tree_spec import positions


def tree_logits(model, prefix, tokens, parents):
    device = model.device
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + len(tokens))
        model(torch.tensor([prefix], device=device), cache=cache)
        return model(torch.tensor([tokens], device=device), cache=cache,
                     positions=positions(parents, len(prefix), device))[0]
