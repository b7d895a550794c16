"""Searches the tokens as a space-joined string, so [2, 3] matches inside [12, 3]."""


def propose_ngram(context: list[int], n: int, k: int) -> list[int]:
    if len(context) <= n:
        return []
    text, suffix = " ".join(map(str, context)), " ".join(map(str, context[-n:]))
    at = text.rfind(suffix, 0, len(text) - len(suffix))
    if at < 0:
        return []
    start = text[:at].count(" ") + n
    return context[start:start + k]
