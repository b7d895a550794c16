"""Falls back to a shorter n when the n-gram has no match."""
def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    for m in range(n, 0, -1):  # try n, then n - 1, ... down to unigrams
        if len(context) <= m:
            continue
        suffix = context[-m:]
        for s in range(len(context) - m - 1, -1, -1):
            if context[s:s + m] == suffix:
                return context[s + m:s + m + k]
    return []
