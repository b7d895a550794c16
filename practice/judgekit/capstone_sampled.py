"""The capstone's sampled check: piece 07 (`verify_tree`) inside the loop, against plain sampling's exact law.

`samples` continuations of `tokens` tokens (temperature 1, top-k 3), each step drafting 2 children per root from
the small model's top 3 reversed and sharpened (`ReversedDraft`: most tokens are then decided by rejections and
residuals), counted per continuation and compared with the exact law (Pearson chi-square, fixed seed).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from mini_llm import Transformer, logits_to_probs
from tree_spec import SamplingParams
from tree_spec.analysis.stats import chi_square
from tree_spec.core.contracts import Branching
from tree_spec.drafters.base import Drafter

from .capstone_drafters import ReversedDraft
from .capstone_loop import Pieces, speculate_with
from .values import P_MIN, law_holds


@torch.inference_mode()
def exact_law(target: Transformer, prompt: list[int], n: int, temperature: float, top_k: int
              ) -> dict[tuple[int, ...], float]:
    """The probability of every n-token continuation plain sampling (`mini_llm.generate`) can draw."""
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(n):
        seqs = list(law)
        logits = target(torch.tensor([prompt + list(s) for s in seqs]))[:, -1]
        probs = logits_to_probs(logits, temperature, top_k, None)
        law = {s + (t,): law[s] * float(row[t]) for s, row in zip(seqs, probs) for t in row.nonzero().flatten().tolist()}
    return law


@dataclass
class Sampled:
    """The sampled check's outcome: samples of `tokens` tokens, observed counts per continuation of the law (the
    last cell: continuations the law never draws), the chi-square statistic and p."""

    samples: int
    tokens: int
    observed: list[int]
    stat: float
    p: float

    @property
    def passed(self) -> bool:
        return law_holds(self.p)

    def line(self) -> str:
        return (f"sampled (07): {self.samples} runs of {self.tokens} tokens at temperature 1, top-k 3, 2 children "
                f"per root drawn from the small model's top 3 reversed and sharpened (a draft far from the target); "
                f"chi-square against plain sampling's exact law over {len(self.observed) - 1} continuations: "
                f"statistic {self.stat:.1f}, p = {self.p:.3g} ({'pass' if self.passed else 'FAIL'}: p >= {P_MIN:g}, as in the exercises)")

    def problem(self, broken: list[str]) -> str:
        """Why it failed, given the verify pieces (`broken`: among 01, 02, 09) that already failed the rows."""
        impossible = self.observed[-1]
        clue = (f"; {impossible} of {self.samples} runs wrote a continuation plain sampling never draws (outside "
                f"the top 3), as a sampler that keeps the draft's tokens does" if impossible else "")
        them = "it" if len(broken) == 1 else "them"
        context = (f"your {', '.join(broken)} already failed the greedy rows: fix {them} first, since verify_tree "
                   f"ran on top of {them}" if broken else
                   "verify_tree ran inside the loop with your 01, 02 and 09, which passed the greedy rows")
        return f"the sampled continuations do not follow the target's law (p = {self.p:.2g}){clue}; {context}"


def sampled_check(target: Transformer, small: Drafter, prompt: list[int], samples: int, tokens: int, pieces: Pieces,
                  seed: int = 0) -> Sampled:
    """Run the check with `pieces` (a PieceError propagates) -> Sampled."""
    law = exact_law(target, prompt, tokens, temperature=1.0, top_k=3)
    sampling = SamplingParams(1.0, top_k=3, generator=torch.Generator().manual_seed(seed))
    draft = ReversedDraft(small, 3)
    counts = Counter(tuple(speculate_with(target, draft, prompt, tokens, pieces, Branching((2,)), sampling).tokens)
                     for _ in range(samples))
    cells = list(law)
    observed = [counts.get(c, 0) for c in cells] + [samples - sum(counts.get(c, 0) for c in cells)]
    stat, p = chi_square(observed, [law[c] for c in cells] + [0.0])
    return Sampled(samples, tokens, observed, stat, p)
