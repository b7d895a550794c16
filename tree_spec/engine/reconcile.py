"""The course's loop and vLLM counted the same way: per-position acceptance over the same speculative steps.

vLLM never cuts a step's draft short near a request's `max_tokens` (its scheduler keeps every step's draft length
uniform) and counts what that step accepted, even past the budget; the course's loop drafts only the tokens still
needed. So the course's side runs with room for a full draft in every step and counts only the steps vLLM runs:
those that start before `max_tokens` new tokens. On identical output the two then see the same drafts, and a
deterministic proposer (prompt lookup) gives identical counts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mini_llm import Transformer

from ..analysis.trace import RecordingTrace
from ..core.contracts import Proposer
from ..decoding.chain import speculative_generate
from .runner import VllmRun


@dataclass
class AcceptanceCounts:
    """Over a set of speculative steps: how many proposed at least one token, and per draft position i how many
    accepted it (so every draft before it too)."""

    drafts: int
    accepted_per_position: list[int]

    @property
    def rates(self) -> list[float]:
        """Unconditional acceptance per position: accepted at i / steps that drafted."""
        return [a / self.drafts for a in self.accepted_per_position] if self.drafts else []

    @property
    def alphas(self) -> list[float]:
        """Per-position α: accepted at i / accepted at i - 1 (at 0: / steps that drafted)."""
        reached = [self.drafts] + self.accepted_per_position[:-1]
        return [a / r if r else 0.0 for a, r in zip(self.accepted_per_position, reached)]


def vllm_counts(run: VllmRun, k: int) -> AcceptanceCounts:
    """vLLM's counters as AcceptanceCounts over k positions."""
    per_position = run.accepted_per_position
    return AcceptanceCounts(run.drafts, per_position + [0] * (k - len(per_position)))


def course_counts(
    target: Transformer, drafter: Proposer | Transformer, prompts: Sequence[Sequence[int]], max_tokens: int, k: int,
) -> tuple[AcceptanceCounts, list[list[int]]]:
    """Greedy chain decoding of each prompt in the course's loop, counted over the steps vLLM runs for
    `max_tokens` new tokens -> (counts, the first `max_tokens` new tokens per prompt)."""
    drafts, accepted, outputs = 0, [0] * k, []
    for prompt in prompts:
        trace = RecordingTrace()
        out = speculative_generate(target, drafter, prompt, max_tokens + k + 1, k=k, trace=trace)
        fed = [span.info["tokens"] for span in trace.spans if span.kind == "verify"]
        produced = 1  # the prefill's token
        for n, a in zip(fed, out.accepted_per_call):
            if produced >= max_tokens:
                break
            drafts += n > 1
            for i in range(a):
                accepted[i] += 1
            produced += a + 1
        outputs.append(out.tokens[:max_tokens])
    return AcceptanceCounts(drafts, accepted), outputs
