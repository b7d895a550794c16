"""Turns the caller's path into slot numbers in place."""
import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    path[:] = [start + node for node in path]
    src = torch.tensor(path, device=cache.k.device)
    end = start + len(path)
    cache.k[:, :, :, start:end] = cache.k[:, :, :, src]
    cache.v[:, :, :, start:end] = cache.v[:, :, :, src]
    cache.length = end
