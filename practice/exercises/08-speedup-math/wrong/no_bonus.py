"""Leaves out the target's own token: E = alpha + ... + alpha^k."""
def expected_tokens(alpha, k):
    if alpha == 1:
        return float(k)
    return alpha * (1 - alpha ** k) / (1 - alpha)


def speedup(alpha, k, c):
    return expected_tokens(alpha, k) / (k * c + 1)


def break_even_alpha(verify_overhead, k):
    return verify_overhead / k
