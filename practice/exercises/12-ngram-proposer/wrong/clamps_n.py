"""Shortens n to fit a short context (len(context) - 1) instead of proposing nothing."""
def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    n = min(n, len(context) - 1)
    if n <= 0:
        return []
    suffix = context[-n:]
    for s in range(len(context) - n - 1, -1, -1):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
