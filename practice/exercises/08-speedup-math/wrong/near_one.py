"""Treats any alpha within 1e-3 of 1 as alpha = 1, so E(0.9995, k) comes out as k + 1."""


def expected_tokens(alpha: float, k: int) -> float:
    if abs(1 - alpha) < 1e-3:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def speedup(alpha: float, k: int, c: float) -> float:
    return expected_tokens(alpha, k) / (k * c + 1)


def break_even_alpha(verify_overhead: float, k: int) -> float:
    return verify_overhead / k
