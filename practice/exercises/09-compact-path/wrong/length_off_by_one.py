"""Sets cache.length one short of start + len(path)."""
from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    for i, node in enumerate(path):
        cache.k[:, :, :, start + i] = cache.k[:, :, :, start + node]
        cache.v[:, :, :, start + i] = cache.v[:, :, :, start + node]
    cache.length = start + len(path) - 1
