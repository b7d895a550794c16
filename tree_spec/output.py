"""What a speculative generation returns: the tokens and the counters behind τ and α."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpecOutput:
    """Result of `speculative_generate` / `tree_speculative_generate`.

    tokens: the new tokens only (compare with `generate(...)[0].tolist()`).
    target_calls: target forward passes, the prompt's prefill included.
    accepted_per_call: draft tokens committed by each verify pass (the prefill proposes none).
    proposed: draft tokens sent to the target (every tree node but the roots).
    draft_calls: drafter forward passes. seconds: wall time of the whole generation.
    accepted_at_depth[d] / proposed_at_depth[d]: verify passes that committed a draft token at
    depth d + 1 / that drafted down to depth d + 1 (per-position acceptance).
    """

    tokens: list[int] = field(default_factory=list)
    target_calls: int = 0
    accepted_per_call: list[int] = field(default_factory=list)
    proposed: int = 0
    draft_calls: int = 0
    seconds: float = 0.0
    accepted_at_depth: list[int] = field(default_factory=list)
    proposed_at_depth: list[int] = field(default_factory=list)

    @property
    def tau(self) -> float:
        """τ: tokens committed per target forward, counting the target's own token (plain decoding = 1.00)."""
        return len(self.tokens) / self.target_calls if self.target_calls else 0.0

    @property
    def alpha(self) -> float:
        """α: accepted draft tokens / proposed draft tokens."""
        return sum(self.accepted_per_call) / self.proposed if self.proposed else 0.0

    @property
    def acceptance_per_position(self) -> list[float]:
        """Fraction of verify passes that accepted a draft token at depth 1, 2, ..."""
        return [a / p for a, p in zip(self.accepted_at_depth, self.proposed_at_depth)]

    def record_verify(self, accepted: int, proposed: int, depth: int) -> None:
        """Count one verify pass that drafted `proposed` tokens down to `depth` and committed `accepted`."""
        self.target_calls += 1
        self.accepted_per_call.append(accepted)
        self.proposed += proposed
        missing = depth - len(self.proposed_at_depth)
        self.proposed_at_depth += [0] * missing
        self.accepted_at_depth += [0] * missing
        for d in range(depth):
            self.proposed_at_depth[d] += 1
            self.accepted_at_depth[d] += d < accepted

    def summary(self) -> str:
        """One line: tokens, target calls, τ, α, draft calls, time."""
        return (
            f"{len(self.tokens)} tokens, {self.target_calls} target calls, "
            f"tau {self.tau:.2f} tokens/call (incl. the target's token), alpha {self.alpha:.2f}, "
            f"{self.draft_calls} draft calls, {self.seconds:.2f} s"
        )
