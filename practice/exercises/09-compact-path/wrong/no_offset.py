"""Moves slot path[i] instead of start + path[i]."""
import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    index = torch.tensor(path)
    cache.k[:, :, :, start:start + len(path)] = cache.k[:, :, :, index]
    cache.v[:, :, :, start:start + len(path)] = cache.v[:, :, :, index]
    cache.length = start + len(path)
