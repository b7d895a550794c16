"""Searches only the last 512 tokens for an earlier occurrence (a fixed look-back window)."""


def propose_ngram(context, n, k):
    if len(context) <= n:
        return []
    suffix = context[-n:]
    for s in range(len(context) - n - 1, max(len(context) - n - 1 - 512, -1), -1):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
