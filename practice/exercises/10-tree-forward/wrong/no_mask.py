"""Runs the tree without its mask (causal attention)."""
import torch

from tree_spec import positions


def tree_logits(model, prefix, tokens, parents):
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + len(tokens))
        model(torch.tensor([prefix]), cache=cache)
        return model(torch.tensor([tokens]), cache=cache, positions=positions(parents, len(prefix)))[0]
