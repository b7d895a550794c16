"""Lets the suffix match itself (s = len(context) - n)."""
def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    suffix = context[-n:]
    for s in range(len(context) - n, -1, -1):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
