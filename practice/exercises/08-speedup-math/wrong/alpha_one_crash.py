"""Uses the closed form at alpha = 1 (division by zero)."""
def expected_tokens(alpha, k):
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(alpha, k, c):
    return expected_tokens(alpha, k) / (k * c + 1)


def break_even_alpha(verify_overhead, k):
    return verify_overhead / k
