"""Ignores the drafting cost: speedup = E."""
def expected_tokens(alpha, k):
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(alpha, k, c):
    return expected_tokens(alpha, k)


def break_even_alpha(verify_overhead, k):
    return verify_overhead / k
