"""Moves the slots of batch row 0 only (indexes dim 1 with 0)."""
import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    src = start + torch.tensor(path, device=cache.k.device)
    end = start + len(path)
    cache.k[:, 0, :, start:end] = cache.k[:, 0, :, src]
    cache.v[:, 0, :, start:end] = cache.v[:, 0, :, src]
    cache.length = end
