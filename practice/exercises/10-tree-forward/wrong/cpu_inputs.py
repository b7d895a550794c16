"""Builds the token ids, positions and mask on the CPU whatever the model's device."""
import torch

from mini_llm import Transformer


def tree_logits(model: Transformer, prefix: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
    n = len(tokens)
    depth = [0] * n
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            depth[i] = depth[parent] + 1
            mask[i] = mask[parent]
        mask[i, i] = True
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + n)
        model(torch.tensor([prefix]), cache=cache)
        pos = torch.tensor([len(prefix) + d for d in depth])
        return model(torch.tensor([tokens]), cache=cache, positions=pos, mask=mask)[0]
