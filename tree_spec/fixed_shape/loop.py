"""The loop every fixed-shape decoder shares, for a GPU: one CUDA graph per step, one host read per step.

The list-based loops (`tree_spec.decoding`) keep tokens in Python lists and read every verify result on the
host: clear, and fast enough on a CPU, where the math dominates. On a GPU the embedded model is launch-bound,
and every `.tolist()` inside a step stalls the CPU until the GPU drains. Here a whole step (drafting, the
verify pass over a fixed number of tokens, acceptance, the cache rollback, the drafter's catch-up) is device
tensor code with the same shapes every step, so it is captured once as a CUDA graph
(`mini_llm.graphs.CapturedCall`) and replayed; the host reads one small tensor per step (how many drafts were
accepted and the tokens emitted) to extend the output and decide whether to go on.

The price of fixed shapes: every step drafts its full shape even near the end of the budget (the extra tokens
are cut off), the verify pass always feeds the same number of tokens, and the caches' lengths live on the
device (`FixedShapeCache`). The rules are the core's tensor forms: `accept_chain_greedy`, `chain_rejection`,
`tree_accepted_nodes`, `rerank`; the output is cut by `SpecOutput.commit`.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from mini_llm import Transformer
from mini_llm.cache import FixedShapeCache
from mini_llm.graphs import CapturedCall, graphs_available

from ..core.contracts import GREEDY, SamplingParams
from ..core.output import SpecOutput
from ..core.request import Request, validate_request
from ..decoding.loop import target_forward
from .drafters import FixedShapeDrafter, draw


class FixedShapeLoop:
    """What every fixed-shape decoder shares: caches of `max_len` slots, a step captured once (on the first
    request) and replayed for every step of every request, one host read per step.

    Subclasses set `self.drafter` (a `FixedShapeDrafter`), `self.room` (the most slots past the committed ones
    a step writes into the target's cache) and `self.draft_calls_per_step`, and define `_step` and `_drafted`.
    graphs: capture the step as a CUDA graph (default: on CUDA when greedy; sampled steps run the same code
    eagerly, since their draws come from your `sampling.generator`).
    """

    drafter: FixedShapeDrafter
    room: int
    draft_calls_per_step: int

    def __init__(
        self, target: Transformer, max_len: int, sampling: SamplingParams = GREEDY, graphs: bool | None = None,
    ) -> None:
        self.target, self.sampling = target, sampling
        self.graphs = (graphs_available(target.device) and sampling.greedy) if graphs is None else graphs
        self.cache = FixedShapeCache(target.cfg, max_len, target.dtype, target.device)
        self.step: CapturedCall | None = None

    def _step(self, root: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """root [] (the last committed token) -> (next root [], report [1 + m]: n accepted drafts, then the m
        emitted tokens: n drafts, the target's token, filler). Device code only: no host read."""
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
        """prompt_ids: list[int] or LongTensor [T] / [1, T] -> SpecOutput with the new tokens only (greedy: those
        of `generate(target, prompt, max_new_tokens)`, exactly in fp32)."""
        return self.run(validate_request(self.target.cfg, self.drafter.vocab_size, prompt_ids, max_new_tokens,
                                         eos_token_id))

    @torch.inference_mode()
    def run(self, request: Request) -> SpecOutput:
        """Decode one validated request (`validate_request`); ValueError if it does not fit `max_len`, or if its last
        steps would feed positions past the model's `max_position_embeddings` (a fixed-shape step drafts its whole
        shape even where the budget cuts it; the list-based loops draft only what the budget needs)."""
        start_time = time.perf_counter()
        prompt, max_new_tokens = request.prompt, request.max_new_tokens
        if len(prompt) + max_new_tokens + self.room > self.cache.max_len:
            raise ValueError(
                f"prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + {self.room} slots a step writes > "
                f"max_len={self.cache.max_len}"
            )
        limit = self.target.cfg.max_position_embeddings
        if len(prompt) + max_new_tokens + self.room > limit:
            most = limit - len(prompt) - self.room
            fix = f"ask for at most {most} new tokens" if most > 0 else "shorten the prompt"
            raise ValueError(
                f"prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) + {self.room} positions a step drafts "
                f"> max_position_embeddings ({limit}): {fix}, or decode with the list-based loop "
                "(tree_spec.speculative_generate and the like)"
            )
        out = SpecOutput()
        if max_new_tokens == 0:
            return out
        self.cache.truncate(0)
        self.drafter.cache.truncate(0)
        prompt_t = torch.tensor(prompt, device=self.target.device)
        logits, feats = target_forward(self.target, self.drafter, prompt_t[None], self.cache)
        root, _ = draw(logits[-1], self.sampling)
        self.drafter.start(prompt_t, root, feats)
        out.target_calls = 1
        out.tokens.append(int(root))
        if self.step is None:
            self.step = CapturedCall(self._step, (root,), self.graphs, state=(self.cache.length, *self.drafter.state()))
        while len(out.tokens) < max_new_tokens and out.tokens[-1] not in request.eos:
            root, report = self.step(root)
            n, *emitted = report.tolist()  # the step's one host read
            room = max_new_tokens - len(out.tokens)  # the last steps draft past the budget: commit cuts there
            out.commit(emitted[:n], emitted[n], *self._drafted(room), request.eos, room=room)
        out.draft_calls = len(out.accepted_per_call) * self.draft_calls_per_step
        out.seconds = time.perf_counter() - start_time
        return out
