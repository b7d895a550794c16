"""Feature-level drafters: Medusa heads and recurrent heads (EAGLE-1, EAGLE-3 style, MTP) as Drafters.

Both read the target's features that the generation loop passes to `observe` (one row per committed
token) and turn head outputs into logits with the target's own final norm + LM head.

A reduced draft vocabulary (`draft_vocab`, EAGLE-3's d2t idea): the LM head is evaluated only on the rows
of those token ids (e.g. the N most frequent target tokens, `tree_spec.tools.named_drafters.frequent_tokens`);
every other token gets logit -inf, so the drafter never proposes it. Verification is unchanged, so greedy outputs stay
identical to the target's; only acceptance can drop (when the target's token is outside the subset).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from mini_llm import Config, KVCache, Transformer
from mini_llm.linear import gemv_layout
from mini_llm.model import rope_cos_sin

from ..core.contracts import TargetFeatures
from ..core.growth import top_children
from ..core.topology import depths
from .base import Drafter, _common_prefix
from .heads import MedusaHeads, RecurrentHead


class _FeatureDrafter(Drafter):
    """Shared bookkeeping: the target, a head, how many feature rows have been observed, the draft vocabulary.

    draft_vocab: LongTensor [N] of token ids the drafter may propose (None: the whole vocabulary).
    """

    def __init__(self, target: Transformer, head: torch.nn.Module, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__(target.cfg.vocab_size, target.device)
        if head.hidden_size != target.cfg.hidden_size:
            raise ValueError(f"this {head.kind} head reads features of width {head.hidden_size}, the target's are "
                             f"{target.cfg.hidden_size} wide: a head drafts only for the model it was trained on")
        deepest = max(getattr(head, "feature_layers", ()), default=-1)
        if deepest >= target.cfg.num_hidden_layers:
            raise ValueError(f"this {head.kind} head reads the output of layer {deepest}; the target has "
                             f"{target.cfg.num_hidden_layers} layers")
        self.target, self.head = target, head.to(target.device).eval()
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
        self.draft_vocab, self._vocab_weight = ids, gemv_layout(weight[ids])

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Head outputs [n, C] -> draft logits [n, V]: the target's final norm + LM head (only the draft
        vocabulary's rows when one is set; -inf elsewhere)."""
        if self.draft_vocab is None:
            return self.target.logits_from_hidden(hidden)
        small = F.linear(self.target.norm(hidden), self._vocab_weight)  # [n, N]
        full = small.new_full((*small.shape[:-1], self.vocab_size), float("-inf"))
        return full.index_copy_(-1, self.draft_vocab, small)

    def top(self, hidden: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Head outputs [n, C] -> `top_children` of their logits: token ids [n, w] and draft log-probabilities
        [n, w]. With a draft vocabulary, picked among its N tokens only (the -inf rest never wins), so the
        full-vocabulary logits are never built."""
        if self.draft_vocab is None:
            return top_children(self.target.logits_from_hidden(hidden), width)
        ids, logp = top_children(F.linear(self.target.norm(hidden), self._vocab_weight), width)  # over the N
        return self.draft_vocab[ids], logp

    @torch.inference_mode()
    def next_logits(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        return self.logits(self._features(context, tokens, parents, frontier))

    @torch.inference_mode()
    def next_top(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int],
        width: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.top(self._features(context, tokens, parents, frontier), width)

    def _features(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        """The head's output [len(frontier), C] for each frontier node (what `logits` / `top` score)."""
        raise NotImplementedError

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
        self._outputs_for, self._outputs = -1, None

    def reset(self, max_len: int) -> None:
        self.seen, self.last, self._outputs_for = 0, None, -1

    def observe(self, features: TargetFeatures) -> None:
        self.seen += features.hidden.shape[0]
        self.last = features.hidden[-1]

    def _features(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        """The output [len(frontier), C] of the head for each frontier node's depth (all heads run once per step)."""
        self._check_aligned(context)
        if self._outputs_for != len(context):
            self._outputs = self.head(self.last)  # [K, C]
            self._outputs_for = len(context)
            self.calls += 1
        depth = depths(parents)
        levels = [depth[node] for node in frontier]
        if max(levels) >= self.head.num_heads:
            raise ValueError(f"Medusa has {self.head.num_heads} heads: trees can be at most that deep")
        return self._outputs[levels]


class HeadDrafter(_FeatureDrafter):
    """A recurrent head (EAGLE-1, EAGLE-3 style, MTP) drafting on its own predicted features.

    Its sequence is pairs: position t holds (head feature of token t-1, token t). The committed pairs
    (target features) fill slots [0, L) of its own one-layer KV cache, L = len(context); the root's pair
    is the last of them. Tree node i at depth d >= 1 is the pair (predicted feature of its parent, its
    token) at position L + d. Within a step, every forwarded node's K/V stays in the cache after the
    committed pairs (as in EAGLE's draft loop), so a call forwards only the new frontier, each node
    attending to the committed pairs and its own ancestors; the next step truncates them away.

    Per step it keeps, by tree node id: the tree seen so far (a later call must extend it, as the tree
    builders do; another tree starts the step's tree over), each forwarded node's cache slot, its output
    feature (`out` [cap, C], row 0 the root's) and the step slots holding it and its ancestors (`anc`
    [cap, cap] bool), so a level's mask and inputs are a few tensor lookups.
    """

    fixed_shape_twin = "recurrent_head"

    def __init__(self, target: Transformer, head: RecurrentHead, draft_vocab: torch.Tensor | None = None) -> None:
        super().__init__(target, head, draft_vocab)
        self.feature_layers = head.feature_layers
        self.cache: KVCache | None = None
        self.features = torch.empty(0, head.cfg.hidden_size, device=self.device)  # [>= seen, C] head features
        self.pair_tokens: list[int] = []  # tokens of the committed pairs in self.cache (positions 1, 2, ...)
        self.step: list[int] = []  # context + root of the current step
        self.tree_tokens: list[int] = []  # the step's tree so far (node 0 the root)
        self.tree_parents: list[int] = []
        self.tree_depths: list[int] = []
        self.slot: dict[int, int] = {}  # forwarded tree node -> its step slot (0 = the first slot after L)
        self.out = self.features.new_empty(0, head.cfg.hidden_size)  # [cap, C]
        self.anc = torch.empty(0, 0, dtype=torch.bool, device=self.device)  # [cap, cap]
        self.rope = rope_table(head.cfg, 0, self.device)

    def reset(self, max_len: int) -> None:
        if self.cache is None or self.cache.max_len < max_len:
            self.cache = self.head.new_cache(1, max_len, self.target.device)
        self.cache.truncate(0)
        self.seen, self.pair_tokens, self.step = 0, [], []
        self._grow_features(max_len)
        self._grow_tree(64)

    @torch.inference_mode()
    def observe(self, features: TargetFeatures) -> None:
        n = features.hidden.shape[0]
        self._grow_features(self.seen + n)
        self.features[self.seen:self.seen + n] = self.head.encode(features.hidden, features.layers)
        self.seen += n

    def _features(
        self, context: Sequence[int], tokens: Sequence[int], parents: Sequence[int], frontier: Sequence[int]
    ) -> torch.Tensor:
        """The head's output feature [len(frontier), C] of each frontier node, forwarding what is missing."""
        self._check_aligned(context)
        seq = [*context, int(tokens[0])]
        if self.step != seq:  # a new step: the last step's tree is forgotten (its slots get overwritten)
            self.step = seq
            self._forward_pairs(seq)
        self._extend_tree(tokens, parents)
        pending = sorted(_with_ancestors(parents, frontier, self.slot))
        while pending:  # a node's input is its parent's output: forward level by level
            ready = [n for n in pending if parents[n] == 0 or parents[n] in self.slot]
            self._forward_nodes(ready)
            pending = [n for n in pending if n not in self.slot]
        return self.out[frontier]

    def _extend_tree(self, tokens: Sequence[int], parents: Sequence[int]) -> None:
        """Take the step's tree as it is now: new nodes get their depths; a tree that does not extend the one
        seen so far starts the step's tree over (its nodes' slots are dropped)."""
        m = len(self.tree_tokens)
        if not m or list(tokens[:m]) != self.tree_tokens or list(parents[:m]) != self.tree_parents:
            self.cache.truncate(len(self.step) - 1)
            self.tree_tokens, self.tree_parents, self.slot, m = [int(tokens[0])], [-1], {}, 1
        self._grow_tree(len(tokens))
        self.tree_depths = depths(parents)
        self.tree_tokens += map(int, tokens[m:])
        self.tree_parents += parents[m:]

    def _forward_pairs(self, seq: list[int]) -> None:
        """Bring the committed pairs up to the root's (dropping last step's tree nodes); sets row 0 of `out`."""
        L = len(seq) - 1
        known = len(self.pair_tokens)
        common = known if seq[1:known + 1] == self.pair_tokens else _common_prefix(self.pair_tokens, seq[1:])
        keep = min(common, self.cache.length, L - 1)  # the root's pair is always run again
        self.cache.truncate(keep)
        self._ensure_room(L)
        T = L - keep
        mask = None if T == 1 else torch.ones(T, L, dtype=torch.bool, device=self.device).tril(keep)
        ids = torch.tensor([seq[keep + 1:]], device=self.device)
        positions = torch.arange(keep + 1, L + 1, device=self.device)
        out = self.head(self.features[None, keep:L], self.target.embed_tokens(ids), positions, self.cache, mask,
                        self._rope(L + 1))
        self.calls += 1
        self.pair_tokens, self.out[0] = seq[1:], out[0, -1]
        self.tree_tokens, self.tree_parents, self.tree_depths, self.slot = [], [], [], {}

    def _forward_nodes(self, nodes: list[int]) -> None:
        """One head pass over tree `nodes` whose parents' outputs are known; their K/V join the cache."""
        L = len(self.step) - 1
        used, T = self.cache.length - L, len(nodes)  # step slots already taken, new nodes
        self._ensure_room(L + used + T)
        parents, depth = self.tree_parents, self.tree_depths
        index = torch.tensor(nodes, device=self.device)
        up = torch.tensor([parents[n] for n in nodes], device=self.device)
        slots = torch.arange(used, used + T, device=self.device)
        self.anc[index] = self.anc[up]  # a node sees its ancestors' slots and its own
        self.anc[index, slots] = True
        mask = None
        if not (T == 1 and depth[nodes[0]] == used + 1):  # else: a chain's next node, which sees every slot
            mask = torch.cat((torch.ones(T, L, dtype=torch.bool, device=self.device), self.anc[index, :used + T]), 1)
        ids = torch.tensor([[self.tree_tokens[n] for n in nodes]], device=self.device)
        positions = torch.tensor([L + depth[n] for n in nodes], device=self.device)
        out = self.head(self.out[up][None], self.target.embed_tokens(ids), positions, self.cache, mask,
                        self._rope(L + max(depth[n] for n in nodes) + 1))
        self.calls += 1
        self.out[index] = out[0]
        self.slot.update(zip(nodes, range(used, used + T)))

    def _rope(self, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's RoPE tables [>= positions, head_dim], grown (doubled) when too short."""
        if self.rope[0].shape[0] < positions:
            self.rope = rope_table(self.head.cfg, 2 * positions, self.device)
        return self.rope

    def _grow_features(self, rows: int) -> None:
        """Make room for `rows` committed feature rows (doubling)."""
        if self.features.shape[0] < rows:
            bigger = self.features.new_zeros(2 * rows, self.features.shape[1])
            bigger[:self.seen] = self.features[:self.seen]
            self.features = bigger

    def _grow_tree(self, nodes: int) -> None:
        """Make room for a step's tree of `nodes` nodes in `out` and `anc` (doubling)."""
        if self.out.shape[0] < nodes:
            out = self.features.new_zeros(2 * nodes, self.features.shape[1])
            out[:self.out.shape[0]] = self.out
            self.out, self.anc = out, torch.zeros(2 * nodes, 2 * nodes, dtype=torch.bool, device=self.device)
            for node, slot in sorted(self.slot.items()):  # ancestors come first: rebuild their rows
                self.anc[node] = self.anc[self.tree_parents[node]]
                self.anc[node, slot] = True

    def _ensure_room(self, needed: int) -> None:
        """Grow the head cache (keeping its slots) when `needed` slots would not fit."""
        if self.cache.max_len >= needed:
            return
        bigger = self.head.new_cache(1, 2 * needed, self.device)
        n = self.cache.length
        bigger.k[..., :n, :], bigger.v[..., :n, :] = self.cache.k[..., :n, :], self.cache.v[..., :n, :]
        bigger.length, self.cache = n, bigger


def rope_table(cfg: Config, positions: int, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [positions, head_dim] of positions 0..positions-1 (`rope_cos_sin`'s values)."""
    cos, sin = rope_cos_sin(torch.arange(positions, device=device), cfg.head_dim, cfg.rope_theta)
    return cos[0, :, 0], sin[0, :, 0]


def _with_ancestors(parents: Sequence[int], nodes: Sequence[int], done: dict[int, int]) -> set[int]:
    """`nodes` and their ancestors below the root that are not in `done`."""
    found: set[int] = set()
    for node in nodes:
        while node > 0 and node not in found and node not in done:
            found.add(node)
            node = parents[node]
    return found
