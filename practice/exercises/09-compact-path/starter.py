from mini_llm import KVCache


def keep_path(cache: KVCache, start: int, path: list[int]) -> None:
    """Move slot start + path[i] to start + i in cache.k and cache.v, then set cache.length = start + len(path)."""
    raise NotImplementedError("compact the cache")
