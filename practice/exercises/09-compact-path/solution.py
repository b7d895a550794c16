import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    """Move slot start + path[i] to start + i in cache.k and cache.v, then set cache.length = start + len(path)."""
    src = start + torch.tensor(path, device=cache.k.device)
    end = start + len(path)
    cache.k[:, :, :, start:end] = cache.k[:, :, :, src]
    cache.v[:, :, :, start:end] = cache.v[:, :, :, src]
    cache.length = end
