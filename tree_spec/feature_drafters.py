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

from .drafters import Drafter, TargetFeatures, _common_prefix
from .heads import MedusaHeads, RecurrentHead
from .topology import depths


class _FeatureDrafter(Drafter):
    """Shared bookkeeping: the target, a head, how many feature rows have been observed, the draft vocabulary.

    draft_vocab: LongTensor [N] of token ids the drafter may propose (None: the whole vocabulary).
    """

    def __init__(self, target: Transformer, head: torch.nn.Module, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__()
        self.target, self.head = target, head.to(target.device).eval()
        self.seen = 0
        self.draft_vocab: torch.Tensor | None = None
        self._vocab_weight: torch.Tensor | None = None
        if draft_vocab is not None:
            self.set_draft_vocab(draft_vocab)

    def __repr__(self) -> str:
        vocab = "" if self.draft_vocab is None else f", draft vocabulary {len(self.draft_vocab)}"
        return f"{type(self).__name__}({self.head.kind}, {sum(p.numel() for p in self.head.parameters()):,} parameters{vocab})"

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

    @property
    def vocab_size(self) -> int:
        return self.target.cfg.vocab_size

    @property
    def device(self) -> torch.device:
        return self.target.device

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

    Its sequence is pairs: position t holds (head feature of token t-1, token t). Committed pairs
    (target features) stay in its own one-layer KV cache; tree node i at depth d >= 1 is the pair
    (predicted feature of its parent, its token) at position len(context) + d. Tree nodes are never
    kept in the cache: each call forwards the new committed pairs plus the frontier and its
    ancestors under the tree mask, then truncates back. Outputs are remembered per path, so a
    node's input is known once its parent was on a previous frontier.
    """

    def __init__(self, target: Transformer, head: RecurrentHead, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__(target, head, draft_vocab)
        self.feature_layers = head.feature_layers
        self.cache: KVCache | None = None
        self.features: list[torch.Tensor] = []  # head features [n, C] of the committed tokens, in chunks
        self.pair_tokens: list[int] = []  # tokens of the pairs in self.cache (positions 1, 2, ...)
        self.outputs: dict[tuple[int, ...], torch.Tensor] = {}  # root..node tokens -> predicted feature [C]
        self.outputs_for: list[int] = []

    def reset(self, max_len: int) -> None:
        if self.cache is None or self.cache.max_len < max_len:
            self.cache = self.head.new_cache(1, max_len, self.target.device)
        self.cache.truncate(0)
        self.seen, self.features, self.pair_tokens, self.outputs, self.outputs_for = 0, [], [], {}, []

    @torch.inference_mode()
    def observe(self, features: TargetFeatures) -> None:
        self.features.append(self.head.encode(features.hidden, features.layers))
        self.seen += features.hidden.shape[0]

    @torch.inference_mode()
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        self._check_aligned(context)
        seq = [*context, tokens[0]]
        if self.outputs_for != seq:
            self.outputs, self.outputs_for = {}, seq
        paths = _paths(tokens, parents)
        needed = _with_ancestors(parents, frontier) - {0}
        missing = sorted({parents[n] for n in needed if paths[parents[n]] not in self.outputs})
        if missing:  # inputs of these nodes are their parents' outputs: compute those first
            self.next_logits(context, tokens, parents, missing)
        out = self._forward(seq, tokens, parents, sorted(needed), paths)
        self.calls += 1
        rows = torch.stack([out[paths[node]] for node in frontier])
        return self.logits(rows)

    def _forward(
        self, seq: list[int], tokens: Sequence[int], parents: Sequence[int], nodes: list[int],
        paths: list[tuple[int, ...]],
    ) -> dict[tuple[int, ...], torch.Tensor]:
        """One head pass: new committed pairs up to the root's, then `nodes` (tree nodes, depth >= 1)."""
        if len(self.features) > 1:
            self.features = [torch.cat(self.features)]
        features, L = self.features[0], len(seq) - 1
        if self.cache is None or self.cache.max_len < L + len(nodes):
            self.reset_cache(2 * (L + len(nodes)))
        keep = min(_common_prefix(self.pair_tokens, seq[1:]), self.cache.length)
        if paths[0] not in self.outputs:
            keep = min(keep, L - 1)  # re-run the root's pair to get its output
        self.cache.truncate(keep)
        pair_pos = list(range(keep + 1, L + 1))
        depth = depths(parents)
        index = {node: len(pair_pos) + j for j, node in enumerate(nodes)}
        feats = [features[p - 1] for p in pair_pos] + [self.outputs[paths[parents[n]]] for n in nodes]
        ids = [seq[p] for p in pair_pos] + [tokens[n] for n in nodes]
        pos = pair_pos + [L + depth[n] for n in nodes]
        T, m = len(ids), len(pair_pos)
        if T == 0:
            return self.outputs
        mask = torch.zeros(T, keep + T, dtype=torch.bool)
        mask[:, :keep] = True
        mask[:, keep:keep + m] = torch.ones(T, m, dtype=torch.bool).tril()  # pairs: causal; nodes: all pairs
        for n in nodes:  # a tree node sees its ancestors below the root and itself
            a = n
            while a != 0:
                mask[index[n], keep + index[a]] = True
                a = parents[a]
        device = self.target.device
        id_tensor = torch.tensor([ids], device=device)
        out = self.head(torch.stack(feats)[None], self.target.embed_tokens(id_tensor),
                        torch.tensor(pos, device=device), self.cache, mask.to(device))[0]
        self.cache.truncate(L)
        self.pair_tokens = seq[1:]
        if m and pair_pos[-1] == L:
            self.outputs[paths[0]] = out[m - 1]
        for n in nodes:
            self.outputs[paths[n]] = out[index[n]]
        return self.outputs

    def reset_cache(self, max_len: int) -> None:
        """A larger head cache (its committed pairs are re-run on the next call)."""
        self.cache = self.head.new_cache(1, max_len, self.target.device)
        self.pair_tokens = []


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
