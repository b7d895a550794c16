"""Chain speculative decoding in fixed shapes, for a GPU: one CUDA graph per step, one host sync per step.

`speculative_generate` keeps tokens in Python lists and reads every verify result on the host: clear, and
fast enough on a CPU, where the math dominates. On a GPU the embedded model is launch-bound, and every
`.tolist()` inside a step stalls the CPU until the GPU drains. Here a whole step (k draft calls, the
verify pass over the fixed k + 1 tokens, acceptance, the cache rollback, the drafter's catch-up) is
device tensor code with the same shapes every step, so it is captured once as a CUDA graph
(`mini_llm.graphs.CapturedCall`) and replayed; the host reads one small tensor per step (how many drafts
were accepted and the tokens emitted) to extend the output and decide whether to go on.

The price of fixed shapes: every step drafts k tokens even near the end of the budget (the extra tokens
are cut off), the verify pass always feeds k + 1 tokens, and the caches' lengths live on the device
(`StaticCache`). Greedy output equals `generate` (exactly in fp32); sampling is lossless, as in
`verify_chain`, with draws made on the device by the exponential race (argmax p / E, E ~ Exp(1)).
Drafters: a separate small model or the quantized self (`ModelDrafter`), and the recurrent heads
(`HeadDrafter`: EAGLE-1, EAGLE-3 style, MTP).
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from mini_llm import Transformer, logits_to_probs
from mini_llm.cache import StaticCache
from mini_llm.generate import as_int, check_budget, eos_token_ids
from mini_llm.graphs import CapturedCall, graphs_available

from .drafters import Drafter, ModelDrafter, TargetFeatures, as_drafter
from .feature_drafters import HeadDrafter
from .output import SpecOutput
from .sampling import residual
from .tree import _prompt_list, target_forward


def sample_on_device(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of probs [..., V] with no host sync: argmax of probs / E, E ~ Exp(1) i.i.d.

    P(token i wins) = probs[i] / sum(probs) (the exponential race), so it samples the same law as
    torch.multinomial, without reading anything on the host.
    """
    race = torch.empty_like(probs).exponential_(generator=generator)
    return (probs / race).argmax(-1)


class _Choose:
    """Draft or target logits -> (token, probs): argmax when greedy, else a device sample."""

    def __init__(self, temperature: float, top_k: int | None, top_p: float | None, generator) -> None:
        self.temperature, self.top_k, self.top_p, self.generator = temperature, top_k, top_p, generator

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return logits_to_probs(logits, self.temperature, self.top_k, self.top_p)

    def __call__(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.temperature == 0.0:
            return logits.argmax(-1), None
        probs = self.probs(logits)
        return sample_on_device(probs, self.generator), probs


class StaticModelDrafter:
    """A causal LM drafting over its own StaticCache.

    Its cache holds the committed tokens before the last one; a step forwards [last committed, root]
    (T = 2, which rewrites the last committed slot with the same K/V) and then one token per draft, so
    the shapes never depend on how many drafts the previous step accepted.
    """

    def __init__(self, model: Transformer, max_len: int, choose: _Choose) -> None:
        self.model, self.choose = model, choose
        self.cache = StaticCache(model.cfg, max_len, model.dtype, model.device)
        self.last = torch.zeros((), dtype=torch.long, device=model.device)  # last committed token before the root
        self.feature_layers = None

    def state(self) -> tuple[torch.Tensor, ...]:
        return (self.cache.length, self.last)

    def start(self, prompt: torch.Tensor, first_token: torch.Tensor, features: TargetFeatures | None) -> None:
        """prompt [P] (committed), first_token [] (the root of step 1)."""
        if prompt.shape[0] > 1:
            self.model(prompt[None, :-1], cache=self.cache)
        self.last.copy_(prompt[-1])

    def draft(self, root: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """root [] -> draft tokens [k] and, when sampling, their distributions [k, V]."""
        logits = self.model(torch.stack((self.last, root))[None], cache=self.cache)[0, -1]
        tokens, probs = [], []
        for j in range(k):
            token, p = self.choose(logits)
            tokens.append(token)
            probs.append(p)
            if j < k - 1:
                logits = self.model(token[None, None], cache=self.cache)[0, -1]
        return torch.stack(tokens), None if probs[0] is None else torch.stack(probs)

    def commit(self, chain: torch.Tensor, next_token: torch.Tensor, n: torch.Tensor, features) -> None:
        """chain [k + 1] = root + drafts, n accepted: keep root and d_1..d_{n-1} cached; d_n (or the root) is
        the new last token (its slot is rewritten next step)."""
        self.cache.truncate(self.cache.length - chain.shape[0] + 1 + n)
        self.last.copy_(chain.gather(0, n[None])[0])


class StaticHeadDrafter:
    """A recurrent head (EAGLE-1, EAGLE-3 style, MTP) over its own StaticCache of (feature, token) pairs.

    As in `HeadDrafter`: the pair of token t is (the target's feature of token t - 1, token t) at position
    t. After each verify pass the k + 1 pairs (feature of chain row i, token i + 1) are forwarded, with the
    target's next token in place of the first rejected draft; the first n + 1 of them are the committed
    ones, and the output at row n is the head's feature after the new root. Drafting k tokens costs k - 1
    more head calls on its own predicted features.
    """

    def __init__(self, drafter: HeadDrafter, max_len: int, choose: _Choose) -> None:
        self.drafter, self.head, self.choose = drafter, drafter.head, choose
        self.embed = drafter.target.embed_tokens
        self.feature_layers = drafter.feature_layers
        dtype = next(self.head.parameters()).dtype
        self.cache = StaticCache(self.head.cfg, max_len, dtype, drafter.device)
        self.root_out = torch.zeros(self.head.cfg.hidden_size, dtype=dtype, device=drafter.device)
        self.committed = torch.zeros((), dtype=torch.long, device=drafter.device)  # pairs in the cache

    def state(self) -> tuple[torch.Tensor, ...]:
        return (self.cache.length, self.root_out, self.committed)

    def _pairs(
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

    def start(self, prompt: torch.Tensor, first_token: torch.Tensor, features: TargetFeatures) -> None:
        out = self._pairs(self._encode(features), torch.cat((prompt[1:], first_token[None])))
        self.root_out.copy_(out[-1])
        self.committed.copy_(self.cache.length)

    def draft(self, root: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        feature = self.root_out
        tokens, probs = [], []
        for j in range(k):
            token, p = self.choose(self.drafter.logits(feature[None])[0])
            tokens.append(token)
            probs.append(p)
            if j < k - 1:
                feature = self._pairs(feature[None], token[None])[0]
        return torch.stack(tokens), None if probs[0] is None else torch.stack(probs)

    def commit(self, chain: torch.Tensor, next_token: torch.Tensor, n: torch.Tensor, features: TargetFeatures) -> None:
        pair_tokens = torch.cat((chain[1:], next_token[None])).scatter(0, n[None], next_token[None])
        self.cache.truncate(self.committed)
        out = self._pairs(self._encode(features), pair_tokens)
        self.committed.add_(1 + n)
        self.cache.truncate(self.committed)
        self.root_out.copy_(out.index_select(0, n[None])[0])


def static_drafter(drafter: Drafter | Transformer, max_len: int, choose: _Choose):
    """The fixed-shape twin of a ModelDrafter (small model, quantized self) or a HeadDrafter."""
    drafter = as_drafter(drafter)
    if isinstance(drafter, ModelDrafter):
        return StaticModelDrafter(drafter.model, max_len, choose)
    if isinstance(drafter, HeadDrafter):
        return StaticHeadDrafter(drafter, max_len, choose)
    raise ValueError(
        f"static_speculative_generate drafts with a small model, the quantized self or a recurrent head "
        f"(EAGLE, EAGLE-3, MTP), not {type(drafter).__name__}: use speculative_generate for it"
    )


class StaticLoop:
    """What every fixed-shape decoder shares: caches of `max_len` slots, a step captured once (on the first
    request) and replayed for every step of every request, one host read per step.

    Subclasses set `self.drafter` (a static drafter), `self.room` (the most slots past the committed ones a
    step writes into the target's cache) and define `_step(root) -> (next root [], report)`, where report =
    [n accepted drafts, then the emitted tokens: n drafts, the target's token, filler], and `_drafted(room)`.
    graphs: capture the step as a CUDA graph (default: on CUDA when greedy; sampled steps run the same code
    eagerly, since their draws come from your `generator`).
    """

    def __init__(
        self,
        target: Transformer,
        drafter: Drafter | Transformer,
        max_len: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        graphs: bool | None = None,
    ) -> None:
        drafter = as_drafter(drafter)
        if drafter.vocab_size != target.cfg.vocab_size:
            raise ValueError(
                f"drafter vocabulary ({drafter.vocab_size}) != target vocabulary ({target.cfg.vocab_size})"
            )
        self.target, self.temperature, self.generator = target, temperature, generator
        self.graphs = (graphs_available(target.device) and temperature == 0.0) if graphs is None else graphs
        self.choose = _Choose(temperature, top_k, top_p, generator)
        self.cache = StaticCache(target.cfg, max_len, target.dtype, target.device)
        self.step: CapturedCall | None = None

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _drafted(self, room: int) -> tuple[int, int]:
        """(draft tokens proposed, depth drafted) as the list-based loop counts them with `room` tokens left."""
        raise NotImplementedError

    @torch.inference_mode()
    def generate(
        self,
        prompt_ids: Sequence[int] | torch.Tensor,
        max_new_tokens: int,
        eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    ) -> SpecOutput:
        """prompt_ids: list[int] or LongTensor [1, T] -> SpecOutput with the new tokens only (greedy: those
        of `generate(target, prompt, max_new_tokens)`, exactly in fp32)."""
        start_time = time.perf_counter()
        target = self.target
        prompt = _prompt_list(prompt_ids)
        max_new_tokens = check_budget(len(prompt), max_new_tokens, target.cfg.max_position_embeddings)
        if len(prompt) + max_new_tokens + self.room > self.cache.max_len:
            raise ValueError(
                f"prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + {self.room} slots a step writes > "
                f"max_len={self.cache.max_len}"
            )
        eos = set(eos_token_ids(eos_token_id))
        out = SpecOutput()
        if max_new_tokens == 0:
            return out
        self.cache.truncate(0)
        self.drafter.cache.truncate(0)
        prompt_t = torch.tensor(prompt, device=target.device)
        logits, feats = target_forward(target, self.drafter, prompt_t[None], self.cache)
        root, _ = self.choose(logits[-1])
        self.drafter.start(prompt_t, root, feats)
        out.target_calls = 1
        out.tokens.append(int(root))
        if self.step is None:
            self.step = CapturedCall(self._step, (root,), self.graphs, state=(self.cache.length, *self.drafter.state()))
        while len(out.tokens) < max_new_tokens and out.tokens[-1] not in eos:
            root, report = self.step(root)
            n, *emitted = report.tolist()  # the step's one host sync
            new = emitted[: n + 1]
            room = max_new_tokens - len(out.tokens)  # the last steps draft past the budget: cut it there
            stop = min(next((i for i, t in enumerate(new) if t in eos), len(new) - 1), room - 1)
            out.record_verify(min(n, stop + 1, room - 1), *self._drafted(room))
            out.tokens += new[: stop + 1]
        out.draft_calls = len(out.accepted_per_call) * self.draft_calls_per_step
        out.seconds = time.perf_counter() - start_time
        return out


class StaticChain(StaticLoop):
    """Chain speculative decoding (k drafts per step) in fixed shapes: see `StaticLoop`."""

    def __init__(
        self,
        target: Transformer,
        drafter: Drafter | Transformer,
        max_len: int,
        k: int = 4,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        graphs: bool | None = None,
    ) -> None:
        self.k = as_int(k, "k")
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        super().__init__(target, drafter, max_len, temperature, top_k, top_p, generator, graphs)
        self.drafter = static_drafter(as_drafter(drafter), max_len + 1, self.choose)
        self.room, self.draft_calls_per_step = self.k + 1, self.k  # k head or draft-model calls per step
        self.draft_rows = torch.arange(self.k, device=target.device)

    def _drafted(self, room: int) -> tuple[int, int]:
        return min(self.k, room - 1), min(self.k, room - 1)

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root [] -> (next root [], [n, then the k + 1 emitted tokens: n drafts, the target's token, filler])."""
        k, cache, drafter = self.k, self.cache, self.drafter
        drafts, draft_probs = drafter.draft(root, k)
        chain = torch.cat((root[None], drafts))
        start = cache.length.clone()
        logits, feats = target_forward(self.target, drafter, chain[None], cache)  # [k + 1, V]
        if self.temperature == 0.0:
            predicted = logits.argmax(-1)
            n = (predicted[:k] == drafts).cumprod(0).sum()
            next_token = predicted.gather(0, n[None])[0]
        else:  # verify_chain's rule on the device: accept while u * draft(x) < target(x), then the residual
            rows = self.draft_rows
            target_probs = self.choose.probs(logits)
            u = torch.rand(k, device=root.device, generator=self.generator)
            n = (u * draft_probs[rows, drafts] < target_probs[rows, drafts]).cumprod(0).sum()
            padded = torch.cat((draft_probs, torch.zeros_like(draft_probs[:1])))  # row k: the bonus token's
            next_token = sample_on_device(residual(target_probs[n[None]], padded[n[None]]), self.generator)[0]
        cache.truncate(start + 1 + n)
        drafter.commit(chain, next_token, n, feats)
        emitted = torch.cat((drafts, next_token[None])).scatter(0, n[None], next_token[None])
        return next_token, torch.cat((n[None], emitted))


def static_speculative_generate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    k: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    graphs: bool | None = None,
) -> SpecOutput:
    """`speculative_generate`'s chain in fixed shapes, one request through a fresh `StaticChain` sized for it
    (it captures its graph for this request only; keep a StaticChain to serve many).

    Returns SpecOutput with the new tokens only: greedy equals `generate(target, prompt, max_new_tokens)`
    token for token (exactly in fp32).
    """
    budget = max(as_int(max_new_tokens, "max_new_tokens"), 0)
    chain = StaticChain(target, drafter, len(_prompt_list(prompt_ids)) + budget + as_int(k, "k") + 2, k,
                        temperature, top_k, top_p, generator, graphs)
    return chain.generate(prompt_ids, max_new_tokens, eos_token_id)
