"""Moves the slots of every row, then sets the length as a one-row list (cache.lengths = [n])."""
import torch

from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    src = start + torch.tensor(path, device=cache.k.device)
    end = start + len(path)
    cache.k[:, :, :, start:end] = cache.k[:, :, :, src]
    cache.v[:, :, :, start:end] = cache.v[:, :, :, src]
    cache.lengths = [end]
