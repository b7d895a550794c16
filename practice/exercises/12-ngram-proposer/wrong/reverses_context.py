"""Reverses the caller's context in place to scan it from the end."""


def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    if len(context) <= n:
        return []
    context.reverse()
    suffix = context[:n]
    for s in range(1, len(context) - n + 1):
        if context[s:s + n] == suffix:
            return context[max(s - k, 0):s][::-1]
    return []
