"""A drafter's rank-acceptance profile: where the target's greedy token sits among the draft's candidates.

Walk the target's own greedy continuation of held-out prompts; at every position ask the drafter for its
next-token logits at depths d = 1..D along that path and record the rank r of the target's token among the draft's
candidates (r = 1: its top-1). A tree whose level d gives every node its top-w_d children accepts depth d exactly
when r_d <= w_d at every depth up to d (siblings are alternatives of one distribution: at most one of them
matches). The profile keeps each position's ranks up to its first miss, in order, so
`RankProfile.tokens_per_pass(branching)` replays the decoder on the measured text: a pass at position t accepts
a(t) = Σ_d Π_{j<=d} 1[r_j <= w_j] tokens and the next pass starts at t + a(t) + 1 (no independence assumption, and
only the positions a real run visits, which are more often right after a miss). `RankProfile.table()` gives
P(rank r at depth d | depths < d within the top-R) over all positions, for printing.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from mini_llm import KVCache, Transformer, generate

from ..decoding.loop import target_forward
from ..drafters.base import Drafter
from ..drafters.model import as_drafter


@dataclass
class RankProfile:
    """Where the target's greedy token sits among a drafter's candidates, depth by depth, position by position.

    sequences[p][t]: the ranks "r1 r2 ..." at depths 1, 2, ... of position t of prompt p's greedy continuation,
    up to the first miss (a rank above max_rank ends the string; "" = missed at depth 1).

    Two averages. `reach(branching)` (the default, walk=True) follows the decoder: from position t a pass with
    this branching accepts a(t) tokens and the next root is t + a(t) + 1, so it averages over the positions a
    real run visits. Those are more often right after a rejection, where the draft tends to miss again, so the
    plain average over every position (walk=False, and `table()`) overstates tokens per pass.
    """

    drafter: str
    max_rank: int
    depth: int
    sequences: list[list[str]]
    model: str = ""
    new_tokens: int = 0
    draft_vocab: int | None = None

    @property
    def positions(self) -> int:
        return sum(len(seq) for seq in self.sequences)

    def _ranks(self) -> np.ndarray:
        """ranks [positions, depth], every prompt's positions in order (max_rank + 1 from the first miss on)."""
        if getattr(self, "_cached", None) is None:
            ranks = np.full((self.positions, self.depth), self.max_rank + 1, dtype=np.int64)
            for i, key in enumerate(k for seq in self.sequences for k in seq):
                rs = [int(r) for r in key.split()]
                ranks[i, :len(rs)] = rs
            self._cached = ranks
        return self._cached

    def reach(self, branching: Sequence[int], walk: bool = True) -> list[float]:
        """P(depths 1..d all accepted) for d = 1..len(branching): the fraction of positions (those a decoder
        with this branching visits, or all of them) whose rank at every depth j <= d is within branching[j-1]."""
        return self.reach_many([branching], walk)[0, :len(branching)].tolist()

    def reach_many(self, shapes: Sequence[Sequence[int]], walk: bool = True) -> np.ndarray:
        """reach() of many branching lists -> [len(shapes), depth] (zero beyond each list's depth)."""
        if any(len(s) > self.depth for s in shapes):
            raise ValueError(f"the profile was measured to depth {self.depth}")
        if any(w > self.max_rank for s in shapes for w in s):
            raise ValueError(f"the profile records ranks up to {self.max_rank}")
        ranks = self._ranks()
        starts = np.cumsum([0] + [len(seq) for seq in self.sequences])
        out = np.zeros((len(shapes), self.depth))
        for i in range(0, len(shapes), 256):
            chunk = shapes[i:i + 256]
            widths = np.zeros((len(chunk), self.depth), dtype=np.int64)
            for j, sh in enumerate(chunk):
                widths[j, :len(sh)] = sh
            passed = np.cumprod(ranks[None, :, :] <= widths[:, None, :], axis=2)  # [S, N, D]
            if not walk:
                out[i:i + len(chunk)] = passed.mean(axis=1)
                continue
            accepted = passed.sum(axis=2)  # [S, N]
            for j in range(len(chunk)):
                visited = []
                for lo, hi in zip(starts[:-1], starts[1:]):
                    t = lo
                    while t < hi:
                        visited.append(t)
                        t += accepted[j, t] + 1
                out[i + j] = passed[j, visited].mean(axis=0)
        return out

    def tokens_per_pass(self, branching: Sequence[int], walk: bool = True) -> float:
        """Predicted tokens per verify pass (the target's own token counted): 1 + Σ_d reach."""
        return 1.0 + sum(self.reach(branching, walk))

    def table(self) -> list[list[float]]:
        """[depth][max_rank]: P(the target's token is the draft's rank-r candidate at depth d | every depth
        before d was within the top max_rank), over every position (Sequoia's positional acceptance, per depth)."""
        ranks = self._ranks()
        out = []
        for d in range(self.depth):
            alive = (ranks[:, :d] <= self.max_rank).all(axis=1)
            total = alive.sum()
            out.append([float((alive & (ranks[:, d] == r)).sum() / total) if total else 0.0
                        for r in range(1, self.max_rank + 1)])
        return out

    def describe(self, ranks_shown: int = 4) -> str:
        """The table as text, with the top-w cumulative columns."""
        table = self.table()
        head = " ".join(f"r={r}".rjust(6) for r in range(1, ranks_shown + 1))
        lines = [f"{self.drafter}: P(target token = draft's rank-r candidate at depth d | shallower depths in "
                 f"the top {self.max_rank}), {self.positions} positions",
                 f"  depth {head}   top-1  top-2  top-4"]
        for d, row in enumerate(table, 1):
            cum = np.cumsum(row)
            lines.append(f"  {d:5d} " + " ".join(f"{p:6.3f}" for p in row[:ranks_shown]) +
                         f"   {cum[0]:.3f}  {cum[min(1, len(cum) - 1)]:.3f}  {cum[min(3, len(cum) - 1)]:.3f}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "RankProfile":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def _rank(logits: torch.Tensor, token: int) -> int:
    """1-based rank of `token` in logits [V] (1 = the argmax); V + 1 if its logit is -inf (never proposed)."""
    value = logits[token]
    if value == float("-inf"):
        return logits.shape[-1] + 1
    return 1 + int((logits > value).sum())


def start_walk(
    target: Transformer, drafter: Drafter, prompt: Sequence[int], new_tokens: int, depth: int
) -> tuple[list[int], list[int], KVCache]:
    """Set up a walk along the target's greedy continuation of `prompt` -> (the prompt as a list, the continuation:
    new_tokens + depth + 1 tokens, a fresh target cache), with the drafter reset for the walk."""
    prompt = list(prompt)
    reference = generate(target, torch.tensor([prompt], device=target.device), new_tokens + depth + 1)[0].tolist()
    max_len = len(prompt) + new_tokens + depth + 2
    drafter.reset(max_len)
    return prompt, reference, target.new_cache(batch_size=1, max_len=max_len)


@torch.inference_mode()
def measure_rank_profile(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompts: Sequence[Sequence[int]],
    new_tokens: int = 64,
    depth: int = 8,
    max_rank: int = 8,
    name: str = "",
    vocab_subsets: dict[int, torch.Tensor] | None = None,
) -> dict[int | None, RankProfile]:
    """Rank profiles of `drafter` along the target's greedy continuation of each prompt.

    At each of the first `new_tokens` positions t the drafter sees the committed context (and, for feature
    drafters, the target's features of it) and drafts a chain along the target's own tokens g_{t+1..t+depth};
    the rank of g_{t+d} in its depth-d logits is recorded. One target decode step per position (the root),
    `depth` drafter calls. vocab_subsets: {N: token ids} -> also the profile the drafter would have with its
    proposals restricted to those ids (ranks among them). Returns {None: full profile, N: ...}.
    """
    drafter = as_drafter(drafter)
    if hasattr(drafter, "head") and hasattr(drafter.head, "num_heads"):
        depth = min(depth, drafter.head.num_heads)  # Medusa drafts at most num_heads deep
    members = {n: torch.zeros(drafter.vocab_size, dtype=torch.bool, device=drafter.device)
               .index_fill_(0, ids.to(drafter.device), True) for n, ids in (vocab_subsets or {}).items()}
    masks = [None, *members.values()]
    sequences: dict[int | None, list[list[str]]] = {key: [] for key in [None, *members]}
    device = target.device
    for prompt in prompts:
        prompt, reference, cache = start_walk(target, drafter, prompt, new_tokens, depth)
        fed = prompt
        ranks_here: list[list[list[int]]] = []   # [position][vocabulary][depth]
        for t in range(new_tokens + 1):
            logits, feats = target_forward(target, drafter, torch.tensor([fed], device=device), cache)
            if feats is not None:
                drafter.observe(feats)
            if int(logits[-1].argmax()) != reference[t]:
                raise RuntimeError("the walk left the target's greedy path")
            if t == new_tokens:
                break
            chain = reference[t:t + depth + 1]
            rows = [drafter.next_logits(prompt + reference[:t], chain[:d], [-1, *range(d - 1)], [d - 1])[0].float()
                    for d in range(1, depth + 1)]
            ranks_here.append([[_rank(row if mask is None else torch.where(mask, row, float("-inf")), g)
                                for row, g in zip(rows, chain[1:])] for mask in masks])
            fed = [reference[t]]
        for i, key in enumerate(sequences):
            sequences[key].append([" ".join(map(str, itertools.takewhile(lambda r: r <= max_rank, ranks[i])))
                                   for ranks in ranks_here])
    return {key: RankProfile(name, max_rank, depth, seqs, new_tokens=new_tokens, draft_vocab=key)
            for key, seqs in sequences.items()}
