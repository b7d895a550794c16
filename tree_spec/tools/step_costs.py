"""The cost of one speculative step on this machine, fitted from real runs: verify + Σ_levels draft + overhead.

Target forwards and drafter calls are timed through the loops' trace (`RecordingTrace`): "prefill" and "verify"
spans for the target, "draft_call" spans (one per tree level) for the drafter.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from mini_llm import Transformer, generate

from ..analysis.clocks import device_ms, one_thread
from ..analysis.curve import CostCurve
from ..analysis.trace import RecordingTrace, forward_spans
from ..core.topology import tree_node_count
from ..decoding.tree import tree_speculative_generate
from ..drafters.base import Drafter


@dataclass
class StepCosts:
    """ms of one speculative step = verify + Σ over levels of draft + overhead.

    verify: curve.ms(nodes + 1) + verify_extra_ms (what a real verify pays beyond the curve's forward: the
    hidden states for feature drafters); draft per level = draft_ms + draft_per_node_ms · frontier +
    draft_first_ms on level 1 (which also catches the drafter up on the committed tokens); overhead_ms: the
    rest of the step (Python tree building, acceptance, cache compaction).
    """

    curve: CostCurve
    draft_ms: float
    draft_per_node_ms: float
    draft_first_ms: float
    verify_extra_ms: float
    overhead_ms: float
    plain_ms_per_token: float

    def step_ms(self, branching: Sequence[int]) -> dict[str, float]:
        """{"verify", "draft", "overhead", "total"} ms of one step with this branching."""
        frontier, draft = 1, 0.0
        for level, width in enumerate(branching):
            draft += self.draft_ms + self.draft_per_node_ms * frontier + (self.draft_first_ms if level == 0 else 0.0)
            frontier *= width
        verify = self.curve.ms(tree_node_count(branching) + 1) + self.verify_extra_ms
        return dict(verify=verify, draft=max(draft, 0.0), overhead=self.overhead_ms,
                    total=verify + max(draft, 0.0) + self.overhead_ms)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["curve"] = self.curve.to_dict()
        return d

def _fit(rows: list[tuple[float, ...]], ys: list[float]) -> list[float]:
    """Least squares coefficients (non-negative where the data allow: a negative one is dropped to 0)."""
    x, y = np.array(rows, dtype=np.float64), np.array(ys, dtype=np.float64)
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    while (coef < 0).any() and x.shape[1] > 1:
        keep = coef >= 0
        sub = np.linalg.lstsq(x[:, keep], y, rcond=None)[0]
        coef = np.zeros_like(coef)
        coef[keep] = sub
        if (sub >= 0).all():
            break
    return coef.tolist()


def _level(trace: RecordingTrace, index: int) -> int:
    """The tree level (0: the first) of the "draft_call" span `index`: its rank among its draft span's calls."""
    parent = trace.spans[index].parent
    return sum(1 for s in trace.spans[parent + 1:index] if s.parent == parent and s.kind == "draft_call")


@torch.inference_mode()
def measure_costs(
    target: Transformer,
    drafter: Drafter,
    prompts: Sequence[Sequence[int]],
    curve: CostCurve,
    new_tokens: int = 48,
    shapes: Sequence[Sequence[int]] = ((1, 1, 1, 1), (4, 2, 2, 1), (2, 2, 2, 2, 1, 1)),
) -> StepCosts:
    """Fit StepCosts from short greedy generations with `shapes` (one torch thread, thread CPU time)."""
    drafts: list[tuple[int, int, float]] = []   # (level, frontier width, ms) per drafter call
    verify_extra: list[float] = []
    overhead: list[float] = []
    plain: list[float] = []
    with one_thread():
        tree_speculative_generate(target, drafter, list(prompts[0])[:32], 8, branching=list(shapes[0]))  # warm-up
        for prompt in prompts:
            ids = torch.tensor([list(prompt)], device=target.device)
            t = time.thread_time()
            out = generate(target, ids, new_tokens)
            plain.append(1000 * (time.thread_time() - t) / out.shape[1])
            for shape in shapes:
                trace = RecordingTrace(target.device)
                start = trace.now_ms()
                tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(shape), trace=trace)
                total = trace.now_ms() - start
                prefill, *verifies = trace.top("prefill", "verify")
                calls = [(_level(trace, i), s.info["width"], s.ms) for i, s in enumerate(trace.spans)
                         if s.kind == "draft_call"]
                verify_extra += [s.ms - curve.ms(s.info["tokens"]) for s in verifies]
                drafts += calls
                overhead.append((total - prefill.ms - sum(s.ms for s in verifies) - sum(ms for *_, ms in calls))
                                / len(verifies))
    a, b, c = _fit([(1.0, width, float(level == 0)) for level, width, _ in drafts], [ms for *_, ms in drafts])
    return StepCosts(curve, a, b, c, statistics.median(verify_extra), statistics.median(overhead),
                     statistics.median(plain))


@torch.inference_mode()
def draft_call_breakdown(
    target: Transformer, drafter: Drafter, prompts: Sequence[Sequence[int]], new_tokens: int = 48,
    branching: Sequence[int] = (1, 1, 1, 1), repeats: int = 20,
) -> dict[str, float]:
    """Where a drafter's call goes: ms per `next_logits` call ("draft_call" spans) in greedy tree decoding, split
    into the forward (a feature drafter's head: its decoder layer with its KV cache; a small causal LM: its layers,
    timed by forward hooks), `logits` (final norm + LM head: a head's over the draft vocabulary for each frontier
    node, a causal LM's over every token its forward feeds; timed apart on random hidden states of each call's row
    count, `repeats` times) and the rest (Python bookkeeping: paths, masks, feature rows). One torch thread."""
    # a causal LM in `.model` (the Proposer contract), whose forward ends in its own final norm + LM head;
    # else a feature drafter with its head in `.head`
    language_model = drafter.fixed_shape_twin == "model"
    module = drafter.model if language_model else drafter.head
    forwards = RecordingTrace(drafter.device)
    calls: list[float] = []
    widths: list[int] = []
    with one_thread():
        with forward_spans(module, forwards):
            for prompt in prompts:
                trace = RecordingTrace(drafter.device)
                tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(branching), trace=trace)
                spans = [s for s in trace.spans if s.kind == "draft_call"]
                calls += [s.ms for s in spans]
                widths += [s.info["width"] for s in spans]
        if language_model:
            rows, score, model = [s.info["tokens"] for s in forwards.spans], module.logits_from_hidden, module
        else:
            rows, score, model = widths, drafter.logits, target
        hidden = torch.randn(max(rows), model.cfg.hidden_size, device=drafter.device, dtype=model.norm.weight.dtype)
        logits_ms = {w: statistics.median(device_ms(lambda: score(hidden[:w]), drafter.device)
                                          for _ in range(repeats)) for w in set(rows)}
    total = sum(calls) / len(calls)
    logits = sum(logits_ms[w] for w in rows) / len(calls)
    forward = sum(s.ms for s in forwards.spans) / len(calls) - (logits if language_model else 0.0)
    return dict(calls=len(calls), total_ms=total, forward_ms=forward, logits_ms=logits, other_ms=total - forward - logits)
