def expected_tokens(alpha: float, k: int) -> float:
    """Tokens per target pass, counting the target's own token: 1 + alpha + ... + alpha**k."""
    raise NotImplementedError


def speedup(alpha: float, k: int, c: float) -> float:
    """Speedup over plain decoding when a draft token costs c target forwards."""
    raise NotImplementedError


def break_even_alpha(verify_overhead: float, k: int) -> float:
    """The acceptance ratio r (accepted / proposed; often loosely called alpha) at which
    (1 + k * r) / (1 + verify_overhead) = 1."""
    raise NotImplementedError
