"""Feature-level drafters: Medusa heads and recurrent heads (EAGLE-1, EAGLE-3 style, MTP) as Drafters.

Both read the target's features that the generation loop passes to `observe` (one row per committed
token) and turn head outputs into logits with the target's own final norm + LM head.

A reduced draft vocabulary (`draft_vocab`, EAGLE-3's d2t idea): the LM head is evaluated only on the rows
of those token ids (e.g. the N most frequent target tokens, `tree_spec.tune.frequent_tokens`); every other
token gets logit -inf, so the drafter never proposes it. Verification is unchanged, so greedy outputs stay
identical to the target's; only acceptance can drop (when the target's token is outside the subset).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from mini_llm import KVCache, Transformer

from .base import Drafter, _common_prefix
from ..core.contracts import TargetFeatures
from .heads import MedusaHeads, RecurrentHead
from ..core.topology import depths


class _FeatureDrafter(Drafter):
    """Shared bookkeeping: the target, a head, how many feature rows have been observed, the draft vocabulary.

    draft_vocab: LongTensor [N] of token ids the drafter may propose (None: the whole vocabulary).
    """

    def __init__(self, target: Transformer, head: torch.nn.Module, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__()
        self.target, self.head = target, head.to(target.device).eval()
        self.vocab_size, self.device = target.cfg.vocab_size, target.device
        self.seen = 0
        self.draft_vocab: torch.Tensor | None = None
        self._vocab_weight: torch.Tensor | None = None
        if draft_vocab is not None:
            self.set_draft_vocab(draft_vocab)

    def __repr__(self) -> str:
        vocab = "" if self.draft_vocab is None else f", draft vocabulary {len(self.draft_vocab)}"
        n_params = sum(p.numel() for p in self.head.parameters())
        return f"{type(self).__name__}({self.head.kind}, {n_params:,} parameters{vocab})"

    def set_draft_vocab(self, draft_vocab: torch.Tensor | Sequence[int] | None) -> None:
        """Restrict proposals to the token ids `draft_vocab` [N] (None: the full vocabulary again)."""
        if draft_vocab is None:
            self.draft_vocab = self._vocab_weight = None
            return
        ids = torch.as_tensor(draft_vocab, dtype=torch.long, device=self.target.device).unique()
        if ids.numel() == 0 or int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(f"draft_vocab must be non-empty token ids in [0, {self.vocab_size})")
        t = self.target
        weight = t.embed_tokens.weight if t.cfg.tie_word_embeddings else t.lm_head.weight
        self.draft_vocab, self._vocab_weight = ids, weight[ids].contiguous()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Head outputs [n, C] -> draft logits [n, V]: the target's final norm + LM head (only the draft
        vocabulary's rows when one is set; -inf elsewhere)."""
        if self.draft_vocab is None:
            return self.target.logits_from_hidden(hidden)
        small = F.linear(self.target.norm(hidden), self._vocab_weight)  # [n, N]
        full = small.new_full((*small.shape[:-1], self.vocab_size), float("-inf"))
        return full.index_copy_(-1, self.draft_vocab, small)

    def _check_aligned(self, context: Sequence[int]) -> None:
        if self.seen != len(context):
            raise ValueError(
                f"{type(self).__name__} observed features of {self.seen} tokens but the context has "
                f"{len(context)}: it must be driven by speculative_generate / tree_speculative_generate"
            )


class MedusaDrafter(_FeatureDrafter):
    """Medusa: frontier nodes at depth d get head d+1's logits from the last committed feature.

    The heads ignore the drafted path (that is Medusa's limit), so one head pass per step serves
    every level of the tree; trees may be at most `num_heads` deep.
    """

    feature_layers = ()

    def __init__(self, target: Transformer, heads: MedusaHeads, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__(target, heads, draft_vocab)
        self.last: torch.Tensor | None = None  # [C]: feature of the last committed token
        self._logits_for, self._logits = -1, None

    def reset(self, max_len: int) -> None:
        self.seen, self.last, self._logits_for = 0, None, -1

    def observe(self, features: TargetFeatures) -> None:
        self.seen += features.hidden.shape[0]
        self.last = features.hidden[-1]

    @torch.inference_mode()
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        self._check_aligned(context)
        if self._logits_for != len(context):
            self._logits = self.logits(self.head(self.last))  # [K, V]
            self._logits_for = len(context)
            self.calls += 1
        depth = depths(parents)
        levels = [depth[node] for node in frontier]
        if max(levels) >= self.head.num_heads:
            raise ValueError(f"Medusa has {self.head.num_heads} heads: trees can be at most that deep")
        return self._logits[torch.tensor(levels, device=self._logits.device)]


class HeadDrafter(_FeatureDrafter):
    """A recurrent head (EAGLE-1, EAGLE-3 style, MTP) drafting on its own predicted features.

    Its sequence is pairs: position t holds (head feature of token t-1, token t). The committed pairs
    (target features) fill slots [0, L) of its own one-layer KV cache, L = len(context); the root's pair
    is the last of them. Tree node i at depth d >= 1 is the pair (predicted feature of its parent, its
    token) at position L + d. Within a step, every forwarded node's K/V stays in the cache after the
    committed pairs (as in EAGLE's draft loop), so a call forwards only the new frontier, each node
    attending to the committed pairs and its own ancestors; the next step truncates them away.
    """

    def __init__(self, target: Transformer, head: RecurrentHead, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__(target, head, draft_vocab)
        self.feature_layers = head.feature_layers
        self.cache: KVCache | None = None
        self.features: list[torch.Tensor] = []  # head features [n, C] of the committed tokens, in chunks
        self.pair_tokens: list[int] = []  # tokens of the committed pairs in self.cache (positions 1, 2, ...)
        self.step: list[int] = []  # context + root of the current step
        self.root_out: torch.Tensor | None = None  # predicted feature [C] after the root's pair (this step)
        self.nodes: dict[tuple[int, ...], tuple[int, torch.Tensor]] = {}  # root..node tokens -> (slot, feature [C])

    def reset(self, max_len: int) -> None:
        if self.cache is None or self.cache.max_len < max_len:
            self.cache = self.head.new_cache(1, max_len, self.target.device)
        self.cache.truncate(0)
        self.seen, self.features, self.pair_tokens, self.step, self.root_out, self.nodes = 0, [], [], [], None, {}

    @torch.inference_mode()
    def observe(self, features: TargetFeatures) -> None:
        self.features.append(self.head.encode(features.hidden, features.layers))
        self.seen += features.hidden.shape[0]

    @torch.inference_mode()
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        self._check_aligned(context)
        seq = [*context, int(tokens[0])]
        if self.step != seq:  # a new step: the last step's tree is forgotten (its slots get overwritten)
            self.step, self.root_out, self.nodes = seq, None, {}
        paths = _paths(tokens, parents)
        if self.root_out is None:
            self._forward_pairs(seq)
        pending = [n for n in sorted(_with_ancestors(parents, frontier)) if n and paths[n] not in self.nodes]
        while pending:  # a node's input is its parent's output: forward level by level
            ready = [n for n in pending if parents[n] == 0 or paths[parents[n]] in self.nodes]
            self._forward_nodes(len(context), ready, tokens, parents, paths)
            pending = [n for n in pending if paths[n] not in self.nodes]
        return self.logits(torch.stack([self._feature(n, paths) for n in frontier]))

    def _feature(self, node: int, paths: list[tuple[int, ...]]) -> torch.Tensor:
        """The head's predicted feature [C] after `node` (the root's pair for node 0)."""
        return self.root_out if node == 0 else self.nodes[paths[node]][1]

    def _forward_pairs(self, seq: list[int]) -> None:
        """Bring the committed pairs up to the root's (dropping last step's tree nodes); sets `root_out`."""
        if len(self.features) > 1:
            self.features = [torch.cat(self.features)]
        L = len(seq) - 1
        keep = min(_common_prefix(self.pair_tokens, seq[1:]), self.cache.length, L - 1)  # re-run the root's pair
        self.cache.truncate(keep)
        self._ensure_room(L)
        T = L - keep
        mask = None if T == 1 else torch.ones(T, L, dtype=torch.bool, device=self.device).tril(keep)
        ids = torch.tensor([seq[keep + 1:]], device=self.device)
        positions = torch.arange(keep + 1, L + 1, device=self.device)
        out = self.head(self.features[0][None, keep:L], self.target.embed_tokens(ids), positions, self.cache, mask)
        self.calls += 1
        self.pair_tokens, self.root_out = seq[1:], out[0, -1]

    def _forward_nodes(
        self, L: int, nodes: list[int], tokens: Sequence[int], parents: Sequence[int], paths: list[tuple[int, ...]]
    ) -> None:
        """One head pass over tree `nodes` whose parents' outputs are known; their K/V join the cache."""
        start, T = self.cache.length, len(nodes)
        self._ensure_room(start + T)
        slot = {n: start + j for j, n in enumerate(nodes)}
        rows, cols = [], []
        for j, n in enumerate(nodes):  # a node sees the committed pairs, its ancestors below the root and itself
            a = n
            while a != 0:
                rows.append(j)
                cols.append(slot[a] if a in slot else self.nodes[paths[a]][0])
                a = parents[a]
        mask = None
        if not (T == 1 and len(cols) == start + 1 - L):  # else: a chain's next node, which sees every slot
            mask = torch.zeros(T, start + T, dtype=torch.bool, device="cpu")
            mask[:, :L] = True
            mask[rows, cols] = True
            mask = mask.to(self.device)
        depth = depths(parents)
        feats = torch.stack([self._feature(parents[n], paths) for n in nodes])[None]
        ids = torch.tensor([[int(tokens[n]) for n in nodes]], device=self.device)
        positions = torch.tensor([L + depth[n] for n in nodes], device=self.device)
        out = self.head(feats, self.target.embed_tokens(ids), positions, self.cache, mask)[0]
        self.calls += 1
        for j, n in enumerate(nodes):
            self.nodes[paths[n]] = (start + j, out[j])

    def _ensure_room(self, needed: int) -> None:
        """Grow the head cache (keeping its slots) when `needed` slots would not fit."""
        if self.cache.max_len >= needed:
            return
        bigger = self.head.new_cache(1, 2 * needed, self.device)
        n = self.cache.length
        bigger.k[..., :n, :], bigger.v[..., :n, :] = self.cache.k[..., :n, :], self.cache.v[..., :n, :]
        bigger.length, self.cache = n, bigger


def _paths(tokens: Sequence[int], parents: Sequence[int]) -> list[tuple[int, ...]]:
    """Root-to-node token tuples of every node."""
    paths: list[tuple[int, ...]] = []
    for i, p in enumerate(parents):
        paths.append((paths[p] if p >= 0 else ()) + (int(tokens[i]),))
    return paths


def _with_ancestors(parents: Sequence[int], nodes: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for node in nodes:
        while node >= 0 and node not in found:
            found.add(node)
            node = parents[node]
    return found
