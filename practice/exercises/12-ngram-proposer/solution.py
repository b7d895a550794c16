def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    """-> up to k draft tokens copied from after the most recent earlier occurrence of the last n tokens."""
    if len(context) <= n:
        return []
    suffix = context[-n:]
    for s in range(len(context) - n - 1, -1, -1):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
