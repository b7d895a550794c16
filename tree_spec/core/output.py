"""What a speculative generation returns: the tokens and the counters behind τ and the two acceptance rates.

Two rates, never one symbol for both:
- α, the per-position acceptance rate: P(draft token at depth d accepted | depths < d accepted), measured as
  (passes that accepted depth d) / (passes that drafted depth d and accepted every depth before it).
  This is the α of E = (1 − α^(k+1)) / (1 − α).
- the acceptance ratio: accepted draft tokens / proposed draft tokens (what vLLM's counters export).
  For a chain τ = 1 + k · ratio; do not put it into E(α, k).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class SpecOutput:
    """Result of `speculative_generate` / `tree_speculative_generate`.

    tokens: the new tokens only (compare with `generate(...)[0].tolist()`).
    target_calls: target forward passes, the prompt's prefill included.
    accepted_per_call: draft tokens committed by each verify pass (the prefill proposes none).
    proposed: draft tokens sent to the target (every tree node but the roots).
    draft_calls: drafter forward passes. seconds: wall time of the whole generation.
    Per depth d + 1 (index d): proposed_at_depth[d] verify passes drafted that deep, reached_at_depth[d]
    of them had accepted every shallower depth, accepted_at_depth[d] committed a token there.
    """

    tokens: list[int] = field(default_factory=list)
    target_calls: int = 0
    accepted_per_call: list[int] = field(default_factory=list)
    proposed: int = 0
    draft_calls: int = 0
    seconds: float = 0.0
    accepted_at_depth: list[int] = field(default_factory=list)
    proposed_at_depth: list[int] = field(default_factory=list)
    reached_at_depth: list[int] = field(default_factory=list)

    @classmethod
    def pooled(cls, outputs: Iterable[SpecOutput]) -> SpecOutput:
        """Many runs as one: counters summed (per depth too), tokens concatenated, seconds added. τ, α and the
        acceptance ratio of the result are then pooled over the runs, sums first and the ratio last, not a mean
        of per-run rates: runs of (10 tokens, 5 target calls) and (2 tokens, 2 calls) pool to τ = 12 / 7."""
        total = cls()
        for out in outputs:
            total.tokens += out.tokens
            total.target_calls += out.target_calls
            total.accepted_per_call += out.accepted_per_call
            total.proposed += out.proposed
            total.draft_calls += out.draft_calls
            total.seconds += out.seconds
            for name in ("accepted_at_depth", "proposed_at_depth", "reached_at_depth"):
                mine, theirs = getattr(total, name), getattr(out, name)
                mine += [0] * (len(theirs) - len(mine))
                for d, count in enumerate(theirs):
                    mine[d] += count
        return total

    @property
    def tau(self) -> float:
        """τ: tokens committed per target forward, counting the target's own token (plain decoding = 1.00)."""
        return len(self.tokens) / self.target_calls if self.target_calls else 0.0

    @property
    def acceptance_ratio(self) -> float:
        """Acceptance ratio: accepted draft tokens / proposed draft tokens (vLLM's counter; not α)."""
        return sum(self.accepted_per_call) / self.proposed if self.proposed else 0.0

    @property
    def alpha(self) -> float:
        """α, the per-position acceptance rate: accepted depths / reached depths, pooled over all depths."""
        reached = sum(self.reached_at_depth)
        return sum(self.accepted_at_depth) / reached if reached else 0.0

    @property
    def alpha_at_depth(self) -> list[float]:
        """α at depth 1, 2, ...: P(depth d accepted | every shallower depth accepted), 0.0 where never reached."""
        return [a / r if r else 0.0 for a, r in zip(self.accepted_at_depth, self.reached_at_depth)]

    @property
    def acceptance_per_position(self) -> list[float]:
        """Unconditional: fraction of verify passes drafting depth d that accepted it (= ∏ α up to d for a chain)."""
        return [a / p for a, p in zip(self.accepted_at_depth, self.proposed_at_depth)]

    def record_verify(self, accepted: int, proposed: int, depth: int) -> None:
        """Count one verify pass that drafted `proposed` tokens down to `depth` and committed `accepted`."""
        self.target_calls += 1
        self.accepted_per_call.append(accepted)
        self.proposed += proposed
        missing = depth - len(self.proposed_at_depth)
        self.proposed_at_depth += [0] * missing
        self.accepted_at_depth += [0] * missing
        self.reached_at_depth += [0] * missing
        for d in range(depth):
            self.proposed_at_depth[d] += 1
            self.reached_at_depth[d] += d <= accepted
            self.accepted_at_depth[d] += d < accepted

    def commit(
        self, accepted: list[int], next_token: int, proposed: int, depth: int, eos: frozenset[int] | set[int],
        room: int | None = None,
    ) -> None:
        """Count one verify pass and append what it commits: the accepted drafts and the target's token, cut after
        the first EOS and (fixed-shape loops, which draft past the budget) at `room` tokens."""
        new = accepted + [next_token]
        limit = len(new) if room is None else min(len(new), room)
        stop = next((i for i, t in enumerate(new[:limit]) if t in eos), limit - 1)
        self.record_verify(min(len(accepted), stop + 1, limit - 1), proposed, depth)
        self.tokens += new[: stop + 1]

    def summary(self) -> str:
        """One line: tokens, target calls, τ, both acceptance rates, draft calls, time."""
        return (
            f"{len(self.tokens)} tokens, {self.target_calls} target calls, "
            f"tau {self.tau:.2f} tokens/call (incl. the target's token), "
            f"per-position alpha {self.alpha:.2f}, acceptance ratio {self.acceptance_ratio:.2f}, "
            f"{self.draft_calls} draft calls, {self.seconds:.2f} s"
        )
