"""Moves the slots with index_copy_ and indices built on the CPU, whatever the cache's device."""
import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    src = torch.tensor([start + p for p in path])
    dst = torch.arange(start, start + len(path))
    cache.k.index_copy_(3, dst, cache.k.index_select(3, src))
    cache.v.index_copy_(3, dst, cache.v.index_select(3, src))
    cache.length = start + len(path)
