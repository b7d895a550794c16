def expected_tokens(alpha: float, k: int) -> float:
    """Tokens per target pass, counting the target's own token: 1 + alpha + ... + alpha**k."""
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(alpha: float, k: int, c: float) -> float:
    """Speedup over plain decoding when a draft token costs c target forwards."""
    return expected_tokens(alpha, k) / (k * c + 1)


def break_even_alpha(verify_overhead: float, k: int) -> float:
    """The acceptance ratio r (accepted / proposed; often loosely called alpha) at which
    (1 + k * r) / (1 + verify_overhead) = 1."""
    return verify_overhead / k
