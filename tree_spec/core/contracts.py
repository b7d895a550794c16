"""The contracts between the decoding loops and the draft sources, in one place.

- `SamplingParams` (defined in `mini_llm.sampling`, re-exported here): how the target's (and a sampled draft's)
  logits become a distribution, and where random numbers come from. Temperature 0 is greedy.
- `Branching` and `DynamicShape`: what a loop asks a proposer to draft; `DraftRequest` carries one such ask.
- `Proposer`: anything that drafts a tree (a chain is a tree) and hears what the target verified. Every
  single-sequence loop consumes it; `BatchProposer` is its batched form. `DraftTree` is what it returns;
  `core.proposal` checks a proposer and its proposals against these rules.
- `StepResult`: what one verify pass commits. `Trace`: the hook the loops report their phases to.
See docs/ARCHITECTURE.md for how the pieces fit.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

import torch

from mini_llm.generate import as_int
from mini_llm.sampling import GREEDY, SamplingParams

from .topology import tree_node_count


@dataclass
class TargetFeatures:
    """What a verify pass hands a feature-level drafter, one row per token it fed.

    hidden [n, C]: the target's final-norm input; layers: the outputs [n, C] of the decoder layers
    listed in the drafter's `feature_layers`, in that order (empty when it lists none).
    """

    hidden: torch.Tensor
    layers: tuple[torch.Tensor, ...] = ()

    def rows(self, index: Sequence[int] | torch.Tensor) -> TargetFeatures:
        """The rows `index` (e.g. an accepted tree path, in path order) of every tensor; a run of consecutive
        rows (a chain's accepted prefix) is taken as a view."""
        if not isinstance(index, torch.Tensor) and len(index) and list(index) == list(range(index[0], index[-1] + 1)):
            idx = slice(index[0], index[-1] + 1)
        else:
            idx = torch.as_tensor(index, dtype=torch.long, device=self.hidden.device)
        return TargetFeatures(self.hidden[idx], tuple(x[idx] for x in self.layers))


def check_k(k: object) -> int:
    """k, the drafts of a chain, as a checked int: ValueError unless it is an integer >= 1."""
    k = as_int(k, "k")
    if k < 1:
        raise ValueError(f"k must be >= 1 (the drafts per chain), got {k}")
    return k


def check_min_path_prob(min_path_prob: float) -> None:
    """A path-probability threshold is a probability: raise unless 0 <= it <= 1."""
    if not 0.0 <= min_path_prob <= 1.0:
        raise ValueError(f"min_path_prob must be in [0, 1], got {min_path_prob}")


@dataclass(frozen=True)
class Branching:
    """A tree of fixed shape: every node at level l gets `widths[l]` children; (1,) * k is a chain of k.

    min_path_prob: a node whose path probability under the draft falls below it gets no children (EAGLE-2's
    confidence rule: a chain stops early); 0 keeps the full shape.
    """

    widths: tuple[int, ...]
    min_path_prob: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        tree_node_count(self.widths)  # validates the widths
        check_min_path_prob(self.min_path_prob)

    @property
    def max_nodes(self) -> int:
        """The most draft nodes (root excluded) one tree of this shape holds."""
        return tree_node_count(self.widths)

    @property
    def depth(self) -> int:
        return len(self.widths)

    def cut(self, max_depth: int) -> Branching:
        return self if max_depth >= len(self.widths) else replace(self, widths=self.widths[:max_depth])

    @classmethod
    def of(cls, branching: Sequence[int], min_path_prob: float = 0.0) -> Branching:
        """A learner's `branching` argument (a list of per-level widths) checked -> Branching; ValueError naming it."""
        if isinstance(branching, (str, bytes)) or not isinstance(branching, (Sequence, torch.Tensor)):
            raise ValueError(f"branching must be a list of per-level widths, e.g. [2, 2, 1] (a chain of k: [1] * k), "
                             f"got {branching!r}")
        return cls(tuple(as_int(w, "branching width") for w in branching), min_path_prob)


@dataclass(frozen=True)
class DynamicShape:
    """An EAGLE-2 tree: `depth` levels, the `width` best nodes of each level expanded into `width` children,
    the `total_tokens` best candidates kept (by cumulative draft log-probability).

    min_path_prob: expansion stops before `depth` once the summed path probability of the nodes it would expand
    next falls below it (Dynamic Depth Decoding's rule, Brown et al. 2024; with width 1, a chain's confidence
    stop); 0 always expands `depth` levels.
    """

    depth: int = 5
    width: int = 4
    total_tokens: int = 24
    min_path_prob: float = 0.0

    def __post_init__(self) -> None:
        if self.depth < 0 or self.width < 1 or self.total_tokens < 0:
            raise ValueError(f"need depth >= 0, width >= 1, total_tokens >= 0; "
                             f"got {self.depth}, {self.width}, {self.total_tokens}")
        check_min_path_prob(self.min_path_prob)

    @property
    def max_nodes(self) -> int:
        return self.total_tokens

    def cut(self, max_depth: int) -> DynamicShape:
        return self if max_depth >= self.depth else replace(self, depth=max_depth)


class Trace(Protocol):
    """The loops' hook: `with trace.span(kind, **info):` around each phase ("prefill", "draft", "draft_call",
    "verify", "observe"). Timing tools implement it; the default does nothing."""

    def span(self, kind: str, **info: int) -> AbstractContextManager[None]: ...


class _NoTrace:
    """Records nothing: every span is one shared `nullcontext` (a generator context manager would cost a few µs
    per span, paid several times per verify pass)."""

    _span = nullcontext()

    def span(self, kind: str, **info: int) -> AbstractContextManager[None]:
        return self._span


NO_TRACE: Trace = _NoTrace()


@dataclass(frozen=True)
class DraftRequest:
    """One ask to a proposer: draft below `root` (the last committed token, after `context`), in `shape`,
    at most `max_depth` levels deep, drawing with `sampling`, reporting to `trace`."""

    context: list[int]
    root: int
    shape: Branching | DynamicShape
    max_depth: int
    sampling: SamplingParams = GREEDY
    trace: Trace = field(default=NO_TRACE, compare=False)


@dataclass
class DraftTree:
    """What a proposer returns: a drafted tree, node 0 the root; unpacks as `tokens, parents = tree`.

    draft_probs [n, V]: row i is the distribution node i's children were sampled from (without replacement, children
    in index order = draw order); rows of leaves are 0 (a chain may leave out its leaf's row: [n - 1, V]). None when
    greedy.
    """

    tokens: list[int]
    parents: list[int]
    draft_probs: torch.Tensor | None = None

    def __iter__(self) -> Iterator[list[int]]:
        return iter((self.tokens, self.parents))


@dataclass
class StepResult:
    """What one verify pass commits: the accepted draft tokens, the target's own token after them, how many
    draft tokens it proposed and how deep, and the target's features of the committed rows (root first; None
    unless the drafter reads features)."""

    accepted: list[int]
    next_token: int
    proposed: int
    depth: int
    features: TargetFeatures | None = None


@runtime_checkable
class Proposer(Protocol):
    """A draft source every single-sequence loop consumes (`core.proposal.check_proposer` names a missing member).

    `calls` counts its forward passes; `feature_layers` is None for drafters that read tokens only, else the
    target layers whose outputs it gets through `observe` (one row per committed token, in order).

    Optional capabilities, each with a default for a proposer that lacks it:
    - `limits(shape) -> (nodes, depth)`: the most draft nodes and levels its proposals for `shape` hold (default
      `shape.max_nodes`, `shape.depth`; `core.proposal.proposal_limits`). Lookahead, whose trie ignores the shape,
      declares its own.
    - `batched() -> BatchProposer`: its form for the batched loop, or TypeError saying why it has none (default: one
      copy per row for a proposer that reads no features; `drafters.batch.as_batch_drafter`).
    - `fixed_shape_twin`: which fixed-shape drafter drafts as it does, "model" (the causal LM in `.model`) or
      "recurrent_head" (the head in `.head`); None or absent: none (`fixed_shape.drafters.fixed_shape_drafter`).
    """

    calls: int
    feature_layers: tuple[int, ...] | None

    @property
    def vocab_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def reset(self, max_len: int) -> None:
        """Start a new sequence; context plus drafted nodes will not exceed `max_len` tokens."""

    def propose(self, request: DraftRequest) -> DraftTree:
        """The tree to verify below `request.root`, at most `request.max_depth` deep."""

    def observe(self, features: TargetFeatures) -> None:
        """The target's features of the next committed tokens (only if `feature_layers` is set)."""

    def observe_verify(self, tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> None:
        """Every verify pass: the tree fed (node 0 = root) and the target's logits [n, V] at each node."""


PROPOSER_MEMBERS: tuple[str, ...] = (*Proposer.__annotations__, *(m for m in vars(Proposer) if not m.startswith("_")))


class LevelDrafter(Protocol):
    """A drafter that answers per tree level: its logits [len(frontier), V] after each frontier node."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor: ...


@runtime_checkable
class BatchProposer(Protocol):
    """The batched loop's draft source: a chain for every row at once, rows leaving as they finish."""

    calls: int

    @property
    def vocab_size(self) -> int: ...

    @property
    def device(self) -> torch.device: ...

    def start(self, batch_size: int, max_len: int) -> None:
        """Start `batch_size` new sequences of at most `max_len` tokens."""

    def select_rows(self, rows: Sequence[int]) -> None:
        """Keep only these rows, in this order."""

    def propose(
        self, contexts: list[list[int]], k: int, sampling: SamplingParams
    ) -> tuple[list[list[int]], torch.Tensor | None]:
        """At most k drafts per row after contexts[b] (whose last token is the root) -> (drafts [B][<= k], the draft
        distributions [B, k, V] they were sampled from, or None when greedy)."""
