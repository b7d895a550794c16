"""Drafters for the batched loop: a model drafting every row's chain at once, or one token-level drafter per row."""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from mini_llm import Transformer
from mini_llm.batch import extend_rows

from ..core.contracts import BatchProposer, Branching, DraftRequest, Proposer, SamplingParams
from ..core.proposal import check_proposal, check_proposer
from .base import _common_prefix


class BatchModelDrafter:
    """A causal LM (separate small model, or the quantized self) drafting a chain for every row at once.

    It keeps its own KV cache with a length per row. Per step: one ragged forward catches each row up
    on the tokens committed since its last proposal (the prompt at the first step; then 1 or 2 tokens),
    then k - 1 forwards of [B, 1]: k draft forwards for the whole batch.
    """

    def __init__(self, model: Transformer) -> None:
        self.model, self.vocab_size, self.device = model, model.cfg.vocab_size, model.device
        self.calls = 0
        self.cache = None
        self.seqs: list[list[int]] = []  # per row: the tokens whose K/V are in self.cache

    def __repr__(self) -> str:
        return f"BatchModelDrafter({self.model.num_parameters():,} parameters)"

    def start(self, batch_size: int, max_len: int) -> None:
        self.cache = self.model.new_cache(batch_size=batch_size, max_len=max_len)
        self.seqs = [[] for _ in range(batch_size)]

    def select_rows(self, rows: Sequence[int]) -> None:
        self.cache.select_rows(rows)
        self.seqs = [self.seqs[r] for r in rows]

    def propose(
        self, contexts: list[list[int]], k: int, sampling: SamplingParams
    ) -> tuple[list[list[int]], torch.Tensor | None]:
        """k draft tokens per row after contexts[b] (whose last token is the root) -> (drafts [B][k],
        draft_probs [B, k, V] the drafts were sampled from, or None when greedy); a row may hold fewer than k."""
        keep = [min(_common_prefix(seen, ctx), len(ctx) - 1) for seen, ctx in zip(self.seqs, contexts)]
        self.cache.truncate(keep)                        # drop rejected drafts, keep the committed prefix
        logits = extend_rows(self.model, self.cache, [ctx[n:] for ctx, n in zip(contexts, keep)])  # [B, V]
        drafts, probs = [], []
        for level in range(k):
            if level:
                logits = self.model(token[:, None], cache=self.cache)[:, -1]  # feed the previous draft
            if sampling.greedy:
                token = logits.argmax(-1)                                      # [B]
            else:
                probs.append(sampling.probs(logits))
                token = torch.multinomial(probs[-1], 1, generator=sampling.generator)[:, 0]
            drafts.append(token)
        self.calls += k
        rows = torch.stack(drafts, 1).tolist()                                 # [B][k]
        self.seqs = [ctx + d[:-1] for ctx, d in zip(contexts, rows)]           # the last draft was never fed
        return rows, torch.stack(probs, 1) if probs else None


class PerRowDrafter:
    """A token-level single-sequence Proposer (n-gram / prompt lookup, or any drafter that reads no features),
    one copy per row: the `BatchProposer` over any `Proposer`.

    It batches no forward pass: each row proposes its chain exactly as in `speculative_generate`.
    """

    def __init__(self, drafter: Proposer) -> None:
        self.template, self.vocab_size, self.device = drafter, drafter.vocab_size, drafter.device
        self.rows: list[Proposer] = []

    def __repr__(self) -> str:
        return f"PerRowDrafter({self.template!r})"

    @property
    def calls(self) -> int:
        return sum(d.calls for d in self.rows)

    def start(self, batch_size: int, max_len: int) -> None:
        self.rows = [copy.deepcopy(self.template) for _ in range(batch_size)]
        for d in self.rows:
            d.reset(max_len)

    def select_rows(self, rows: Sequence[int]) -> None:
        self.rows = [self.rows[r] for r in rows]

    def propose(
        self, contexts: list[list[int]], k: int, sampling: SamplingParams
    ) -> tuple[list[list[int]], torch.Tensor | None]:
        chain = Branching((1,) * k)
        trees = []
        for d, ctx in zip(self.rows, contexts):
            request = DraftRequest(ctx[:-1], ctx[-1], chain, k, sampling)
            trees.append(d.propose(request))
            check_proposal(trees[-1], request, d)
        for tree in trees:
            if list(tree.parents) != list(range(-1, len(tree.parents) - 1)):
                raise ValueError(f"{self.template!r} proposed a tree that is not a chain (parents {tree.parents}): "
                                 "the batched loop verifies chains only; decode with tree_speculative_generate")
        drafts = [t.tokens[1:] for t in trees]
        if sampling.greedy:
            return drafts, None
        probs = torch.zeros(len(trees), k, self.vocab_size, device=self.device)   # rows past a short chain stay 0
        for row, tree in zip(probs, trees):
            row[: len(tree.tokens) - 1] = tree.draft_probs[: len(tree.tokens) - 1]
        return drafts, probs


def as_batch_drafter(drafter: Proposer | Transformer | BatchProposer) -> BatchProposer:
    """A BatchProposer as is; a Transformer -> BatchModelDrafter; a Proposer -> its own `batched()` form where it has
    one (a ModelDrafter: BatchModelDrafter; lookahead refuses, saying why), else one copy per row (`PerRowDrafter`)
    if it reads no features. Feature-level drafters (EAGLE, Medusa, MTP) are not batched: TypeError naming them."""
    if isinstance(drafter, Transformer):
        return BatchModelDrafter(drafter)
    if isinstance(drafter, BatchProposer):
        return drafter
    proposer = check_proposer(drafter)
    batched = getattr(proposer, "batched", None)
    if batched is not None:
        return batched()
    if proposer.feature_layers is None:
        return PerRowDrafter(proposer)
    raise TypeError(f"{type(proposer).__name__} reads the target's features (feature_layers "
                    f"{proposer.feature_layers}) and has no batched() form: batched drafting supports a small model, "
                    "the quantized self or a token-level drafter")
