"""Statistics for the lossless checks and the timing verdicts: a dependency-free chi-square test, a sign test, and
paired draft/target distributions."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def _upper_gamma_regularized(a: float, x: float) -> float:
    """Q(a, x) = Gamma(a, x) / Gamma(a): series for x < a + 1, Lentz continued fraction otherwise."""
    if x <= 0:
        return 1.0
    log_prefactor = -x + a * math.log(x) - math.lgamma(a)
    eps, tiny = 1e-15, 1e-300
    if x < a + 1:  # P(a, x) = e^-x x^a / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n))
        term = total = 1 / a
        n = a
        while abs(term) > abs(total) * eps:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1 - total * math.exp(log_prefactor))
    b = x + 1 - a  # Q(a, x) = e^-x x^a / Gamma(a) * 1 / (x + 1 - a - 1 (1 - a) / (x + 3 - a - ...))
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h * math.exp(log_prefactor)


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof) = Q(dof / 2, statistic / 2)."""
    return _upper_gamma_regularized(dof / 2, statistic / 2)


def chi_square(
    observed: Sequence[float] | torch.Tensor, expected: Sequence[float] | torch.Tensor, min_expected: float = 5.0
) -> tuple[float, float]:
    """Pearson goodness-of-fit: observed counts [n] vs expected [n] -> (statistic, p_value).

    `expected` may be counts or probabilities: it is rescaled to the observed total. Bins with
    expected 0 are dropped (if any of them was observed, the fit is impossible: (inf, 0.0)). Bins
    with expected < min_expected (the usual validity rule of thumb) are pooled into one bin, which
    absorbs the smallest remaining bins until it reaches min_expected. dof = bins - 1.
    """
    obs = torch.as_tensor(observed, dtype=torch.float64, device="cpu").flatten()
    exp = torch.as_tensor(expected, dtype=torch.float64, device="cpu").flatten()
    if obs.shape != exp.shape or (exp < 0).any() or exp.sum() <= 0 or (obs < 0).any():
        raise ValueError("observed and expected must have the same length, be >= 0, and expected must sum to > 0")
    exp = exp * (obs.sum() / exp.sum())
    if (obs[exp == 0] > 0).any():
        return math.inf, 0.0
    obs, exp = obs[exp > 0], exp[exp > 0]
    exp, order = exp.sort()
    obs = obs[order]
    n_pooled = int((exp < min_expected).sum())
    while 0 < n_pooled < len(exp) and exp[:n_pooled].sum() < min_expected:
        n_pooled += 1
    if n_pooled > 1:
        obs = torch.cat((obs[:n_pooled].sum(0, keepdim=True), obs[n_pooled:]))
        exp = torch.cat((exp[:n_pooled].sum(0, keepdim=True), exp[n_pooled:]))
    if len(exp) < 2:
        return 0.0, 1.0
    statistic = float(((obs - exp) ** 2 / exp).sum())
    return statistic, chi_square_sf(statistic, len(exp) - 1)


def sign_test(wins: int, n: int) -> float:
    """Two-sided sign test: the p-value of `wins` out of `n` paired rounds (or runs) if either side were equally
    likely to win each one (binomial, p = 1/2). Below 0.05 the split is further from n/2 than chance allows."""
    if not 0 <= wins <= n:
        raise ValueError(f"need 0 <= wins <= n, got wins={wins}, n={n}")
    tail = sum(math.comb(n, i) for i in range(min(wins, n - wins) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def paired_distributions(
    vocab_size: int, alpha: float, batch_shape: tuple[int, ...] = (), generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (target_probs, draft_probs), each [*batch_shape, V], with acceptance rate exactly alpha.

    target = alpha * s + (1 - alpha) * a and draft = alpha * s + (1 - alpha) * b, with s, a, b random
    (Dirichlet(1)) and a, b on a random split of the vocabulary into two non-empty parts. Then
    sum min(target, draft) = alpha and residual(target, draft) = a, which differs from the target, so
    a verifier that skips the residual is visibly biased. Needs vocab_size >= 2 and 0 < alpha <= 1.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")

    device = generator.device if generator is not None else None  # drawn where the generator lives

    def dirichlet(mask: torch.Tensor) -> torch.Tensor:
        e = -torch.rand(*batch_shape, vocab_size, generator=generator, device=device).neg().log1p() * mask  # Exp(1)
        return e / e.sum(-1, keepdim=True)

    rank = torch.rand(*batch_shape, vocab_size, generator=generator, device=device).argsort(-1).argsort(-1)
    split = torch.randint(1, vocab_size, (*batch_shape, 1), generator=generator, device=device)
    in_a = rank < split
    shared = dirichlet(torch.ones_like(in_a))
    target = alpha * shared + (1 - alpha) * dirichlet(in_a)
    draft = alpha * shared + (1 - alpha) * dirichlet(~in_a)
    return target, draft
