"""Looks back only over the last 64 tokens (a fixed window)."""


def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    if len(context) <= n:
        return []
    suffix = context[-n:]
    for s in range(len(context) - n - 1, max(len(context) - 65, -1), -1):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
