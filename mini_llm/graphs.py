"""CUDA graphs for a decode loop: capture a fixed-shape step once, replay it every step.

On a GPU a small model is launch-bound: one decode step is a few hundred tiny kernels, each costing a few
microseconds to launch from Python, while the math takes less. A CUDA graph records those launches once
and replays them with one call. It needs what `FixedShapeCache` gives: the same shapes every step and no
value read on the host inside the step. The model file stays eager and readable; this file only wraps it.

`CapturedCall` does the capture (on CUDA) or just calls the function (elsewhere, or to measure eager);
`FixedShapeDecoder` is plain decoding built on it, the baseline a speculative loop on a GPU must beat.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .cache import FixedShapeCache
from .generate import as_int, check_budget, eos_token_ids, prompt_tensor
from .model import Transformer
from .sampling import GREEDY, SamplingParams, sample_next


def graphs_available(device: torch.device | str) -> bool:
    """CUDA graphs need a CUDA device; everywhere else the fixed-shape code runs eagerly."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


class CapturedCall:
    """fn(*inputs) over fixed-shape tensors, captured as a CUDA graph when `graph` is true.

    Calling it copies the inputs into static buffers (device to device: no host sync) and replays the
    graph; the returned tensors are the graph's static outputs, overwritten by the next call (copy what
    must survive). fn may mutate state tensors (a FixedShapeCache's length); `state` lists them so the
    warm-up runs that precede capture leave them as they were. With graph=False it simply calls fn on
    the buffers: the same code path, eager, to run on a CPU or to measure what the graph saves.
    """

    def __init__(
        self,
        fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]],
        example_inputs: Sequence[torch.Tensor],
        graph: bool,
        state: Sequence[torch.Tensor] = (),
        warmup: int = 2,
    ) -> None:
        self.fn, self.graph = fn, None
        self.inputs = [x.clone() for x in example_inputs]
        if not graph:
            return
        if not graphs_available(self.inputs[0].device):
            raise ValueError("CUDA graphs need CUDA tensors (pass graph=False elsewhere)")
        saved = [t.clone() for t in state]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream: lazy init, autotuning, allocator
            for _ in range(warmup):
                fn(*self.inputs)
        torch.cuda.current_stream().wait_stream(side)
        for t, value in zip(state, saved):
            t.copy_(value)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):  # recorded, not run: the state is untouched by capture
            self.outputs = fn(*self.inputs)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        for buffer, x in zip(self.inputs, inputs):
            buffer.copy_(x)
        if self.graph is None:
            return self.fn(*self.inputs)
        self.graph.replay()
        return self.outputs


class FixedShapeDecoder:
    """Plain decoding over one FixedShapeCache of `max_len` slots, its decode step captured once (on the first
    request) and replayed for every token of every request: capture costs tens of milliseconds, so an engine
    captures at start-up, not per request (vLLM captures its decode graphs when it loads the model).

    sampling: how each token is drawn (`SamplingParams`; greedy by default). graphs: capture the step as a CUDA
    graph (default: on CUDA when greedy; sampling runs the same code eagerly, since its draws come from your
    `sampling.generator`). The loop never reads the GPU on the host, except
    once per token to check for `eos_token_id` when one is given.
    """

    def __init__(
        self, model: Transformer, max_len: int, sampling: SamplingParams = GREEDY, graphs: bool | None = None,
    ) -> None:
        self.model, self.sampling = model, sampling
        self.graphs = (graphs_available(model.device) and sampling.greedy) if graphs is None else graphs
        self.cache = FixedShapeCache(model.cfg, max_len, model.dtype, model.device)
        self.step: CapturedCall | None = None

    def _decode_step(self, token: torch.Tensor) -> torch.Tensor:
        """token [1] -> next token [1]: one forward over the fixed-shape cache."""
        return sample_next(self.model(token[None], cache=self.cache)[:, -1], self.sampling)

    @torch.inference_mode()
    def generate(
        self,
        ids: torch.Tensor | Sequence[int],
        max_new_tokens: int,
        eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """ids [1, T] (or [T], a list) -> new tokens [1, n]: `generate`'s tokens (greedy: exactly in fp32)."""
        model = self.model
        ids = prompt_tensor(ids, model.cfg.vocab_size).to(model.device)
        if ids.shape[0] != 1:
            raise ValueError(f"fixed-shape decoding takes one sequence (batch 1), got {ids.shape[0]}")
        T = ids.shape[1]
        max_new_tokens = check_budget(T, max_new_tokens, model.cfg.max_position_embeddings)
        if T + max_new_tokens > self.cache.max_len:
            raise ValueError(f"prompt ({T}) + max_new_tokens ({max_new_tokens}) > max_len={self.cache.max_len}")
        if max_new_tokens == 0:
            return ids.new_empty(1, 0)
        eos = torch.tensor(eos_token_ids(eos_token_id, model.cfg.vocab_size), dtype=torch.long, device=model.device)
        self.cache.truncate(0)
        out = ids.new_empty(max_new_tokens)
        token = sample_next(model(ids, cache=self.cache)[:, -1], self.sampling)
        out[0] = token[0]
        if self.step is None:
            self.step = CapturedCall(self._decode_step, (token,), self.graphs, state=(self.cache.length,))
        for i in range(1, max_new_tokens):
            if len(eos) and bool(torch.isin(token, eos)):
                return out[None, :i]
            token = self.step(token)
            out[i] = token[0]
        return out[None]


def fixed_shape_generate(
    model: Transformer, ids: torch.Tensor | Sequence[int], max_new_tokens: int,
    temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
    generator: torch.Generator | None = None, eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    graphs: bool | None = None,
) -> torch.Tensor:
    """One request through a fresh `FixedShapeDecoder` sized for it (it captures its graph for this request only;
    keep a FixedShapeDecoder to serve many). ids [1, T] -> new tokens [1, n], the tokens of `generate`."""
    T = prompt_tensor(ids).shape[-1]
    sampling = SamplingParams(temperature, top_k, top_p, generator)
    decoder = FixedShapeDecoder(model, T + max(as_int(max_new_tokens, "max_new_tokens"), 0), sampling, graphs)
    return decoder.generate(ids, max_new_tokens, eos_token_id)
