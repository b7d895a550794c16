"""Requires the occurrence to end before the suffix starts."""
def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    if len(context) <= n:
        return []
    suffix = context[-n:]
    for s in range(len(context) - 2 * n, -1, -1):  # only occurrences that end before the suffix starts
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
