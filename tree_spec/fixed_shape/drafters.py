"""The fixed-shape drafters: a draft model or a recurrent head whose every step is device tensor code.

A list-based drafter (`ModelDrafter`, `HeadDrafter`) reads tree bookkeeping on the host; its fixed-shape twin
keeps its own `FixedShapeCache` (lengths on the device) and drafts k tokens with the same shapes every step, so the
step that calls it can be captured as a CUDA graph. `fixed_shape_drafter` builds the twin a drafter declares
(`fixed_shape_twin`: "model" or "recurrent_head", see `Proposer`).
"""
from __future__ import annotations

from typing import Protocol

import torch

from mini_llm import Transformer
from mini_llm.cache import FixedShapeCache

from ..core.contracts import GREEDY, Proposer, SamplingParams, TargetFeatures
from ..core.sampling import sample_on_device
from ..drafters.features import HeadDrafter
from ..drafters.model import as_drafter


def draw(logits: torch.Tensor, sampling: SamplingParams) -> tuple[torch.Tensor, torch.Tensor | None]:
    """logits [..., V] -> (token [...], the distribution [..., V] it was drawn from, or None when greedy), with
    no host read: the argmax when greedy, else `sample_on_device` from `sampling.probs(logits)`."""
    if sampling.greedy:
        return logits.argmax(-1), None
    probs = sampling.probs(logits)
    return sample_on_device(probs, sampling.generator), probs


class FixedShapeDrafter(Protocol):
    """What a fixed-shape loop drives, every method device tensor code of fixed shapes (no host read).

    cache: the drafter's own FixedShapeCache (the loop empties it per request); feature_layers: as `Proposer`'s.
    """

    cache: FixedShapeCache
    feature_layers: tuple[int, ...] | None

    @property
    def vocab_size(self) -> int: ...

    def state(self) -> tuple[torch.Tensor, ...]:
        """The tensors a step mutates (restored after a CUDA graph's warm-up runs)."""

    def start(self, prompt: torch.Tensor, first_token: torch.Tensor, features: TargetFeatures | None) -> None:
        """A new request: prompt [P] (committed), first_token [] (the root of step 1), the prompt's features."""

    def draft(self, root: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """root [] -> k draft tokens [k] and, when sampling, the distributions [k, V] they were drawn from."""

    def commit(self, chain: torch.Tensor, next_token: torch.Tensor, n: torch.Tensor,
               features: TargetFeatures | None) -> None:
        """After a verify pass over chain [k + 1] (root + drafts): n [] drafts accepted, then next_token [];
        features: the target's features of the chain's rows (None unless `feature_layers` is set)."""


class FixedShapeModelDrafter:
    """A causal LM (small model, quantized self) drafting over its own FixedShapeCache.

    Its cache holds the committed tokens before the last one; a step forwards [last committed, root]
    (T = 2, which rewrites the last committed slot with the same K/V) and then one token per draft, so
    the shapes never depend on how many drafts the previous step accepted.
    """

    feature_layers = None

    def __init__(self, model: Transformer, max_len: int, sampling: SamplingParams = GREEDY) -> None:
        self.model, self.sampling = model, sampling
        self.cache = FixedShapeCache(model.cfg, max_len, model.dtype, model.device)
        self.last = torch.zeros((), dtype=torch.long, device=model.device)  # last committed token before the root

    @property
    def vocab_size(self) -> int:
        return self.model.cfg.vocab_size

    def state(self) -> tuple[torch.Tensor, ...]:
        return (self.cache.length, self.last)

    def start(self, prompt: torch.Tensor, first_token: torch.Tensor, features: TargetFeatures | None) -> None:
        if prompt.shape[0] > 1:
            self.model(prompt[None, :-1], cache=self.cache)
        self.last.copy_(prompt[-1])

    def draft(self, root: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        logits = self.model(torch.stack((self.last, root))[None], cache=self.cache)[0, -1]
        tokens, probs = [], []
        for j in range(k):
            token, p = draw(logits, self.sampling)
            tokens.append(token)
            probs.append(p)
            if j < k - 1:
                logits = self.model(token[None, None], cache=self.cache)[0, -1]
        return torch.stack(tokens), None if probs[0] is None else torch.stack(probs)

    def commit(self, chain: torch.Tensor, next_token: torch.Tensor, n: torch.Tensor,
               features: TargetFeatures | None) -> None:
        """Keep root and d_1..d_{n-1} cached; d_n (or the root) is the new last token (its slot is rewritten
        next step)."""
        self.cache.truncate(self.cache.length - chain.shape[0] + 1 + n)
        self.last.copy_(chain.gather(0, n[None])[0])


class FixedShapeHeadDrafter:
    """A recurrent head (EAGLE-1, EAGLE-3 style, MTP) over its own FixedShapeCache of (feature, token) pairs.

    As in `HeadDrafter`: the pair of token t is (the target's feature of token t - 1, token t) at position
    t. After each verify pass the k + 1 pairs (feature of chain row i, token i + 1) are forwarded, with the
    target's next token in place of the first rejected draft; the first n + 1 of them are the committed
    ones, and the output at row n is the head's feature after the new root. Drafting k tokens costs k - 1
    more head calls on its own predicted features.
    """

    def __init__(self, drafter: HeadDrafter, max_len: int, sampling: SamplingParams = GREEDY) -> None:
        self.drafter, self.head, self.sampling = drafter, drafter.head, sampling
        self.embed = drafter.target.embed_tokens
        self.feature_layers = drafter.feature_layers
        dtype = next(self.head.parameters()).dtype
        self.cache = FixedShapeCache(self.head.cfg, max_len, dtype, drafter.device)
        self.root_out = torch.zeros(self.head.cfg.hidden_size, dtype=dtype, device=drafter.device)  # [C]
        self.committed = torch.zeros((), dtype=torch.long, device=drafter.device)  # pairs in the cache

    @property
    def vocab_size(self) -> int:
        return self.drafter.vocab_size

    def state(self) -> tuple[torch.Tensor, ...]:
        return (self.cache.length, self.root_out, self.committed)

    def forward_pairs(
        self, features: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """features [T, C] (head space), tokens [T] -> predicted features [T, C]; the T pairs join the cache.

        Default: consecutive pairs after the cached ones (positions length + 1 + arange(T), causal); a tree
        level passes its positions [T] and its mask [T, max_len] over all slots.
        """
        T = tokens.shape[0]
        positions = self.cache.positions(T)[0] + 1 if positions is None else positions
        mask = self.cache.attention_mask(T, None) if mask is None else mask
        return self.head(features[None], self.embed(tokens[None]), positions, self.cache, mask)[0]

    def _encode(self, features: TargetFeatures) -> torch.Tensor:
        return self.head.encode(features.hidden, features.layers)

    def start(self, prompt: torch.Tensor, first_token: torch.Tensor, features: TargetFeatures | None) -> None:
        out = self.forward_pairs(self._encode(features), torch.cat((prompt[1:], first_token[None])))
        self.root_out.copy_(out[-1])
        self.committed.copy_(self.cache.length)

    def draft(self, root: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        feature = self.root_out
        tokens, probs = [], []
        for j in range(k):
            token, p = draw(self.drafter.logits(feature[None])[0], self.sampling)
            tokens.append(token)
            probs.append(p)
            if j < k - 1:
                feature = self.forward_pairs(feature[None], token[None])[0]
        return torch.stack(tokens), None if probs[0] is None else torch.stack(probs)

    def commit(self, chain: torch.Tensor, next_token: torch.Tensor, n: torch.Tensor,
               features: TargetFeatures | None) -> None:
        pair_tokens = torch.cat((chain[1:], next_token[None])).scatter(0, n[None], next_token[None])
        self.cache.truncate(self.committed)
        out = self.forward_pairs(self._encode(features), pair_tokens)
        self.committed.add_(1 + n)
        self.cache.truncate(self.committed)
        self.root_out.copy_(out.index_select(0, n[None])[0])


TWINS = {"model": "a small model or the quantized self", "recurrent_head": "a recurrent head: EAGLE, EAGLE-3, MTP"}


def twin_kind(drafter: Proposer, supported: tuple[str, ...], loop: str, fallback: str) -> str:
    """The fixed-shape twin `drafter` declares (`fixed_shape_twin`) when `loop` supports it; ValueError naming the
    drafter, what it declares and the list-based loop to use (`fallback`) otherwise."""
    kind = getattr(drafter, "fixed_shape_twin", None)
    if kind not in supported:
        options = "; ".join(f"{k!r}: {TWINS[k]}" for k in supported)
        raise ValueError(f"{loop} drafts with a drafter whose fixed_shape_twin is {options}. {type(drafter).__name__} "
                         f"declares fixed_shape_twin = {kind!r}: use {fallback} for it")
    return kind


def fixed_shape_drafter(drafter: Proposer | Transformer, max_len: int,
                        sampling: SamplingParams = GREEDY) -> FixedShapeDrafter:
    """The fixed-shape twin a drafter declares (`fixed_shape_twin`; a plain Transformer is a ModelDrafter), with a
    cache of `max_len` slots: "model" -> FixedShapeModelDrafter of its `.model`, "recurrent_head" ->
    FixedShapeHeadDrafter; ValueError for a drafter that declares none."""
    drafter = as_drafter(drafter)
    if twin_kind(drafter, tuple(TWINS), "the fixed-shape chain", "speculative_generate") == "model":
        return FixedShapeModelDrafter(drafter.model, max_len, sampling)
    return FixedShapeHeadDrafter(drafter, max_len, sampling)
