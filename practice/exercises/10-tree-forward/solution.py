import torch

from mini_llm import Transformer


def tree_logits(model: Transformer, prefix: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """Logits [n, V] of every tree node after `prefix`: one prefill forward, then ONE forward over the tree."""
    n, device = len(tokens), model.device
    depth = [0] * n
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    for i, parent in enumerate(parents):
        if parent >= 0:
            depth[i] = depth[parent] + 1
            mask[i] = mask[parent]
        mask[i, i] = True
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + n)
        model(torch.tensor([prefix], device=device), cache=cache)
        pos = torch.tensor([len(prefix) + d for d in depth], device=device)
        return model(torch.tensor([tokens], device=device), cache=cache, positions=pos, mask=mask)[0]
