"""`python -m tree_spec`: the rejection-rule check, an alpha sweep and a tree-mask demo.

alpha is the per-position acceptance rate (each draft token accepted with probability alpha given the
earlier ones were); the sweep prints it beside the acceptance ratio (accepted / proposed, vLLM's counter).

python -m tree_spec --vocab 64 --alpha 0.75 --k 4 --samples 50000 --seed 0
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from .analysis.stats import paired_distributions
from .core.sampling import verify_chain
from .analysis.stats import chi_square
from .analysis.speedup import expected_tokens_per_verify
from .core.topology import tree_node_count
from .core.topology import depths, tree_mask
from .tools.args import ranged

P_THRESHOLD = 1e-3  # the check passes when the chi-square p-value is above this
SWEEP_ALPHAS = (0.2, 0.4, 0.6, 0.8, 0.9, 1.0)
DEMO_PARENTS = [-1, 0, 0, 1, 1, 2]  # a small tree: a root with two children, ...
DEMO_WORDS = ["the", "cat", "dog", "sat", "ran", "barked"]
DEMO_PREFIX = 5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2 (argparse prints the usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(prog="python -m tree_spec", description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=ranged(int, lambda v: v >= 2, ">= 2"), default=32,
                        help="vocabulary size (>= 2)")
    parser.add_argument("--alpha", type=ranged(float, lambda a: 0 < a <= 1, "in (0, 1]"), default=0.75,
                        help="per-position acceptance rate of a draft token, in (0, 1]")
    parser.add_argument("--k", type=ranged(int, lambda k: k >= 1, ">= 1"), default=4,
                        help="draft tokens per step (>= 1)")
    parser.add_argument("--samples", type=ranged(int, lambda n: n >= 1, ">= 1"), default=20000,
                        help="verify steps for the rejection-rule check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the torch.Generator")
    return parser.parse_args(argv)


def run_chains(
    vocab: int, alpha: float, k: int, samples: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """verify_chain on `samples` fresh drafts from a fixed (target, draft) pair with acceptance alpha.

    Returns target_probs [k+1, V], first emitted tokens [samples], n_accepted [samples].
    """
    target_probs, draft_probs = paired_distributions(vocab, alpha, (k + 1,), generator)
    draft_probs = draft_probs[:k]
    drafts = torch.multinomial(draft_probs, samples, replacement=True, generator=generator).T  # [samples, k]
    first, accepted = (torch.empty(samples, dtype=torch.long, device="cpu") for _ in range(2))
    for i, tokens in enumerate(drafts):
        n, token = verify_chain(tokens, draft_probs, target_probs, generator)
        first[i], accepted[i] = tokens[0] if n else token, n
    return target_probs, first, accepted


def measured_rates(accepted: torch.Tensor, k: int) -> tuple[float, float]:
    """n_accepted per verify [steps] -> (per-position α = accepted depths / reached depths, acceptance ratio =
    accepted / proposed)."""
    reached = sum(int((accepted >= d - 1).sum()) for d in range(1, k + 1))
    total = int(accepted.sum())
    return (total / reached if reached else 0.0), total / (k * len(accepted))


def rejection_check(args: argparse.Namespace, generator: torch.Generator) -> bool:
    target_probs, first, accepted = run_chains(args.vocab, args.alpha, args.k, args.samples, generator)
    counts = torch.bincount(first, minlength=args.vocab)
    statistic, p_value = chi_square(counts, target_probs[0])
    passed = p_value > P_THRESHOLD
    print(f"1. Rejection rule: verify_chain x {args.samples} (vocab {args.vocab}, alpha {args.alpha}, k {args.k}, "
          f"seed {args.seed})")
    print(f"   first emitted token vs target_probs: chi-square {statistic:.2f}, p = {p_value:.4f} -> "
          f"{'PASS' if passed else 'FAIL'} (needs p > {P_THRESHOLD})")
    print(f"   tokens per verify (tau, counting the target's token): {(accepted + 1).float().mean():.3f} measured, "
          f"{expected_tokens_per_verify(args.alpha, args.k):.3f} formula")
    alpha, ratio = measured_rates(accepted, args.k)
    print(f"   measured: per-position alpha {alpha:.3f} (the formula's alpha), acceptance ratio {ratio:.3f} "
          f"(accepted / proposed; tau = 1 + k * ratio = {1 + args.k * ratio:.3f})")
    return passed


def alpha_sweep(args: argparse.Namespace, generator: torch.Generator) -> None:
    steps = max(args.samples // 4, 1)
    print(f"\n2. Alpha sweep: tokens per verify (tau), k {args.k}, {steps} verify steps each")
    print("   E(a, k) = (1 - a^(k+1)) / (1 - a); alpha = per-position rate, ratio = accepted / proposed")
    print("   alpha  measured  +- s.e.  E(alpha,k) | ratio  1+k*ratio  E(ratio,k) (the wrong rate in E)")
    for alpha in sorted({*SWEEP_ALPHAS, args.alpha}):
        accepted = run_chains(args.vocab, alpha, args.k, steps, generator)[2]
        tau = (accepted + 1).double()
        se = tau.std().item() / steps**0.5 if steps > 1 else 0.0
        ratio = measured_rates(accepted, args.k)[1]
        print(f"   {alpha:5.2f}  {tau.mean():8.3f}  {se:7.3f}  {expected_tokens_per_verify(alpha, args.k):7.3f}"
              f"    | {ratio:5.3f}  {1 + args.k * ratio:9.3f}  {expected_tokens_per_verify(ratio, args.k):10.3f}")


def mask_demo() -> None:
    mask, depth = tree_mask(DEMO_PARENTS, "cpu"), depths(DEMO_PARENTS)
    n = len(DEMO_PARENTS)
    print(f"\n3. Tree mask: {n} nodes, parents {DEMO_PARENTS}, after a committed prefix of {DEMO_PREFIX} tokens")
    print("   (row = query node; 1 = may attend; the prefix is always visible; position = prefix + depth)")
    print(f"   node  token   parent  depth  position  {' '.join(str(j) for j in range(n))}")
    for i in range(n):
        row = " ".join("1" if v else "." for v in mask[i].tolist())
        position = DEMO_PREFIX + depth[i]
        print(f"   {i:4d}  {DEMO_WORDS[i]:6s}  {DEMO_PARENTS[i]:6d}  {depth[i]:5d}  {position:8d}  {row}")
    counts = ", ".join(f"{b} -> {tree_node_count(b)}" for b in ([2, 2, 1, 1], [3, 3, 2]))
    print(f"   drafted nodes: {counts}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three sections; exit status 0 when the rejection check passes, 1 otherwise."""
    args = parse_args(argv)
    generator = torch.Generator().manual_seed(args.seed)
    passed = rejection_check(args, generator)
    alpha_sweep(args, generator)
    mask_demo()
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
