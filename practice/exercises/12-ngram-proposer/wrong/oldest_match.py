"""Continues the oldest occurrence instead of the most recent one."""
def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    suffix = context[-n:]
    for s in range(len(context) - n):
        if context[s:s + n] == suffix:
            return context[s + n:s + n + k]
    return []
