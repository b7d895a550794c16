"""Running the benchmark's methods interleaved, and reconciling each one's measured ms/token with a prediction from
its measured acceptance and the target's cost curve."""
from __future__ import annotations

import statistics
import time

from tqdm.auto import tqdm

from mini_llm import Transformer

from ..analysis.curve import CostCurve, ForwardTimer
from ..analysis.speedup import tau_from_alpha_at_depth
from ..analysis.timing import time_split
from ..core.contracts import NO_TRACE
from ..core.output import SpecOutput
from .bench_methods import Method

TOLERANCE = 0.15  # predicted vs measured ms/token
# curve rounds after each prompt: one forward on a shared CPU varies by a factor of two (5.3 to 11.8 ms for the
# decode step in one run), so the curve's mean needs more samples than one per prompt to settle within a few percent
CURVE_ROUNDS = 3


def run_bench(methods: list[Method], prompts: list[list[int]], new_tokens: int, temperature: float, seed: int,
              target: Transformer, timer: ForwardTimer | None = None) -> list[list[int]]:
    """Run every method on every prompt, interleaved; accumulate each method's counters and time breakdown
    (prefill, verify forwards, drafter work; thread CPU time, or synchronized wall time when the target is on
    CUDA) in place. After each prompt, `timer` samples the target's cost curve `CURVE_ROUNDS` times more, so the
    curve is measured under the same conditions as the runs. Returns the first method's (plain decoding's) new tokens
    per prompt."""
    for method in methods:  # warm-up: lazy imports, allocator, first-call overheads
        method.run(prompts[0][:16], 4, temperature, seed, NO_TRACE)
    if timer is not None:
        timer.sample(1)
    bar = tqdm(total=len(prompts) * len(methods), desc="bench", unit="run", disable=None)
    wall_start = time.perf_counter()
    references = []
    for i, prompt in enumerate(prompts):
        reference = None
        for method in methods:
            (tokens, out), split = time_split(
                lambda trace: method.run(prompt, new_tokens, temperature, seed + i, trace), target)
            reference = tokens if reference is None else reference
            t = method.totals
            t["tokens"] += len(tokens)
            t["prompts"] += 1
            t["identical"] += tokens == reference
            method.time += split  # a transformers baseline runs no mini_llm forward: only its total counts
            if out is not None:
                method.spec = SpecOutput.pooled([method.spec, out] if method.spec else [out])
            bar.update(1)
        if timer is not None:  # untimed forwards first: the methods' runs left the CPU caches cold
            timer.warm()
            timer.sample(CURVE_ROUNDS)
        references.append(reference)
        if bar.disable:  # no terminal (a background run with a log): one line per prompt instead
            print(f"prompt {i + 1}/{len(prompts)} done, {time.perf_counter() - wall_start:.0f} s", flush=True)
    bar.close()
    return references


def per_depth_acceptance(spec: SpecOutput | None, chain: bool, passes: int) -> list[float]:
    """Chains: α at depth d (accepted given every shallower depth was); other shapes: the fraction of all
    `passes` verify passes that accepted a token at depth d."""
    if spec is None:
        return []
    return spec.alpha_at_depth if chain else [a / passes for a in spec.accepted_at_depth]


def predicted_tau(per_depth: list[float], chain: bool) -> float:
    """Tokens per verify pass from per-depth acceptance: chains 1 + α1 + α1·α2 + ...; trees 1 + Σ_d acceptance."""
    return tau_from_alpha_at_depth(per_depth) if chain else 1.0 + sum(per_depth)


def reconcile(method: Method, curve: CostCurve) -> dict | None:
    """Predicted vs measured ms/token for a mini_llm method (None for the transformers baselines)."""
    t, split = method.totals, method.time
    passes = split.forwards
    if not split.prefill_sizes or not passes:
        return None
    per_depth = per_depth_acceptance(method.spec, method.chain, passes)
    tau = predicted_tau(per_depth, method.chain)
    verify_curve = sum(curve.ms(n) * c for n, c in split.forward_sizes.items()) / passes
    draft = split.draft_ms / passes
    prefill = sum(curve.ms(n) * c for n, c in split.prefill_sizes.items())
    predicted_passes = (t["tokens"] - t["prompts"]) / tau  # the prefill commits each prompt's first token
    predicted = (prefill + predicted_passes * (draft + verify_curve)) / t["tokens"]
    measured = split.total_ms / t["tokens"]
    verify_measured = split.forward_ms / passes
    overhead = split.rest_ms / passes
    calls = [ms for method, _, ms in split.draft_calls if method == "next_logits"]
    call_ms = statistics.median(calls) if calls else None
    gap = predicted / measured - 1
    note = "within ±15 %"
    if abs(gap) > TOLERANCE:
        terms = []
        if abs(verify_measured / verify_curve - 1) > 0.1:
            terms.append(f"verify measured {verify_measured:.2f} vs curve {verify_curve:.2f} ms/pass (the curve times "
                         f"forwards back to back at {curve.context} cached tokens; in the loop each verify follows "
                         "draft work: tree_spec.analysis.curve.forward_after measures both)")
        if overhead > 0.1 * (verify_measured + draft):
            terms.append(f"loop overhead {overhead:.2f} ms/pass not in the model (measured: total − prefill − "
                         "verify forwards − drafter calls: Python tree building, greedy acceptance or the sampling "
                         "verifier, cache bookkeeping)")
        if abs(tau / ((t["tokens"] - t["prompts"]) / passes) - 1) > 0.1:
            terms.append("τ̂ differs from the measured tokens per pass (passes cut short at the token budget)")
        note = "; ".join(terms) or "no single term: see the columns"
    return dict(
        per_depth=per_depth, per_depth_kind="α at depth d" if method.chain else "fraction of passes accepting depth d",
        predicted_tau=tau, measured_tau_per_pass=(t["tokens"] - t["prompts"]) / passes,
        nodes_per_pass=sum(n * c for n, c in split.forward_sizes.items()) / passes,
        draft_ms_per_pass=draft, verify_ms_per_pass_curve=verify_curve, verify_ms_per_pass_measured=verify_measured,
        overhead_ms_per_pass=overhead, overhead_ms_median=statistics.median(split.pass_overhead_ms),
        draft_call_ms_median=call_ms, draft_call_decode_steps=None if call_ms is None else call_ms / curve.ms(1),
        predicted_ms_per_token=predicted, measured_ms_per_token=measured, gap=gap,
        note=note,
    )


def summarize(methods: list[Method], curve: CostCurve | None = None) -> list[dict]:
    """One row per method: τ, both acceptance rates, calls, ms/token, speedup vs the first method (plain greedy),
    identical, and the reconciliation against `curve`."""
    base_ms = methods[0].time.total_ms / methods[0].totals["tokens"]
    rows = []
    for m in methods:
        t, spec = m.totals, m.spec
        ms = m.time.total_ms / t["tokens"]
        plain = m.name.startswith("plain")
        target_calls = spec.target_calls if spec else (t["tokens"] if plain else None)
        rows.append(dict(
            method=m.name, form=m.form,
            tau=t["tokens"] / target_calls if target_calls else None,
            alpha=spec.alpha if spec and spec.proposed else None,
            acceptance_ratio=spec.acceptance_ratio if spec and spec.proposed else None,
            alpha_at_depth=spec.alpha_at_depth if spec else None,
            acceptance_per_position=spec.acceptance_per_position if spec else None,
            target_calls=target_calls, draft_calls=spec.draft_calls if spec else None,
            proposed=spec.proposed if spec else None, accepted=sum(spec.accepted_per_call) if spec else None,
            ms_per_token=ms, speedup=base_ms / ms, identical=t["identical"], tokens=t["tokens"],
            reconciliation=reconcile(m, curve) if curve is not None else None,
        ))
    return rows
