"""Every draft source on one harness: the same held-out prompts, the same target, one machine, one run.

    python -m tree_spec.bench [--target tiny-qwen3] [--draft tiny-qwen3-draft] [--heads models/heads]
                              [--tuned models/tuned] [--prompts 16] [--new-tokens 128] [--temperature 0.0]
                              [--threads 1] [--device cpu] [--out models] [--quick]

Methods run interleaved per prompt (plain greedy, then each method, prompt after prompt), so their
ms/token ratios come from the same conditions. Timing: one torch thread and the thread's CPU time
(`time.thread_time`), which leaves out the time other processes run, though not how they slow this thread
through shared caches and memory bandwidth (interleaving spreads that over all methods); with `--device cuda`,
wall time read after `torch.cuda.synchronize()` (`tree_spec.costs.device_clock`).

Main table: τ (tokens per target call, counting the target's own token; plain = 1.00), α (the per-position
acceptance rate: depth d accepted given depths < d were), the acceptance ratio (accepted / proposed draft
tokens, vLLM's counter), α per depth, target and draft calls, ms/token, speedup vs plain mini_llm greedy,
and how many prompts give tokens identical to plain greedy. With `--temperature 1.0` every method samples
through the lossless verifiers (identity not expected).

Reconciliation table: the target's cost curve is measured in the same run (interleaved with the prompts);
per method, the measured per-depth acceptance gives the predicted tokens per pass, and
predicted ms/token = (prefills + passes × (draft ms per pass + verify ms from the curve at the pass's node
count)) / tokens, beside the measured ms/token. The note says which term is off when they differ by > 15 %.

Tree drafters also run with their tuned shape (rows "(tuned)") when `python -m tree_spec.tune` saved one
under models/tuned/ (a fixed row whose shape tuning kept reads "(= tuned)": one configuration, one row); a
section compares each tuned row with its drafter's fixed rows and names the fastest model-based drafter.
EAGLE-1 and MTP also run as confidence-stopped chains ("confidence stop": `CONFIDENCE_STOP`, or the k and θ
that `python -m tree_spec.tune` saved, with the tuned draft vocabulary when there is one): EAGLE-2's rule
applied to a chain, a different decoder, not a shape.
Methods whose head folder is missing are listed as skipped. Writes BENCHMARK*.md,
.json and .png.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.load import MODELS_DIR, resolve_model_path

from .batch import batch_benchmark
from .chain import speculative_generate
from .costs import DEFAULT_NEW_TOKENS, CostCurve, ForwardTimer, TimeSplit, clock_name, hardware_name, time_split
from .drafters import Drafter, ModelDrafter, QuantizedSelfDrafter
from .dynamic import dynamic_tree_speculative_generate
from .head_io import load_head
from .ngram import NGramDrafter
from .output import SpecOutput
from .prompts import held_out_prompts
from .speedup import tau_from_alpha_at_depth
from .tree import tree_speculative_generate

# run(prompt, max_new_tokens, temperature, seed) -> (new tokens, SpecOutput or None)
Runner = Callable[[list[int], int, float, int], tuple[list[int], SpecOutput | None]]

CHAIN_K = 4
SMALL_TREE = [2, 2, 1, 1]
MEDUSA_TREE = [3, 2, 2, 1]
EAGLE_TREE = [3, 2, 1, 1, 1]
DYNAMIC = dict(depth=6, top_k=4, total_tokens=24)
FALLBACK_CHAIN_K = 3  # shape rows for EAGLE-1 and MTP when no tuned shape was saved
# EAGLE-2's confidence rule on a chain: draft up to k while the draft's path probability (its estimate of the
# chance that every draft so far is accepted) stays >= min_path_prob. Another draft pays when that chance times
# what a token is worth beats a draft call: on this course's CPU a head call costs ~0.9 ms and a token ~3 ms,
# hence ~0.3 (notebook 03 measures both).
CONFIDENCE_STOP = dict(k=6, min_path_prob=0.3)
TOLERANCE = 0.15  # predicted vs measured ms/token
TUNED_DIR = MODELS_DIR / "tuned"
# bench drafter -> its name in tree_spec.tune (models/tuned/<name>.json)
TUNE_NAMES = {"small": "small-model", "int4": "int4-self", "medusa": "medusa", "eagle": "eagle", "eagle3": "eagle3",
              "mtp": "mtp"}


@dataclass
class Method:
    """One benchmark row. drafter: the drafter object (timed per call); chain: τ predicted from per-depth α products;
    shape: the branching list of a static tree or chain (None for other forms)."""

    name: str
    form: str
    run: Runner
    drafter: Drafter | None = None
    chain: bool = False
    shape: tuple[int, ...] | None = None
    spec: SpecOutput | None = None  # counters summed over the prompts
    totals: dict = field(default_factory=lambda: dict(tokens=0, identical=0, prompts=0))
    time: TimeSplit = field(default_factory=TimeSplit)  # summed over the prompts; its forwards are verify passes


def _gen(seed: int, device: torch.device) -> torch.Generator:
    """A seeded generator on the device whose tensors it samples."""
    return torch.Generator(device=device).manual_seed(seed)


def _spec(out: SpecOutput) -> tuple[list[int], SpecOutput]:
    return out.tokens, out


def load_tuned_shapes(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path,
                      model_name: str) -> tuple[dict[str, tuple[Drafter, list[int], dict]], list[str]]:
    """Tuned (drafter, branching, saved dict) per bench drafter key from `python -m tree_spec.tune`'s files, and
    notes on files that could not be used. The drafter carries its tuned draft vocabulary, if any."""
    try:
        from .tune import load_tuned, tuned_drafter
    except ImportError:
        return {}, ["tuned rows: tree_spec.tune not available"]
    shapes, notes = {}, []
    for key, name in TUNE_NAMES.items():
        if load_tuned(name, tuned_dir) is None:
            continue
        try:
            found = tuned_drafter(name, target, draft, heads_dir, tuned_dir, model_name)
        except (FileNotFoundError, ValueError, KeyError) as err:
            notes.append(f"{name} (tuned): {err}")
            continue
        if found is None:
            notes.append(f"{name} (tuned): tuned for another target")
            continue
        shapes[key] = (*found, load_tuned(name, tuned_dir))
    return shapes, notes


def spec_methods(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path | None = TUNED_DIR,
                 greedy: bool = True, model_name: str = "tiny-qwen3") -> tuple[list[Method], list[str]]:
    """mini_llm methods in their natural form, plus tuned shapes; returns (methods, skipped methods with the reason)."""
    methods: list[Method] = []
    skipped: list[str] = []
    tuned, notes = load_tuned_shapes(target, draft, heads_dir, tuned_dir, model_name) if tuned_dir else ({}, [])
    skipped += notes

    def chain(drafter, k, name, form=None):
        run = lambda p, n, t, s: _spec(speculative_generate(target, drafter, p, n, k=k, temperature=t,  # noqa: E731
                                                            generator=_gen(s, target.device)))
        return Method(name, form or f"chain k={k}", run, drafter, chain=True, shape=(1,) * k)

    def confident_chain(kind, drafter, name):
        saved = tuned[kind][2].get("confidence_stop") if kind in tuned else None
        setting = dict(k=saved["k"], min_path_prob=saved["min_path_prob"]) if saved else CONFIDENCE_STOP
        run = lambda p, n, t, s: _spec(speculative_generate(  # noqa: E731
            target, drafter, p, n, **setting, temperature=t, generator=_gen(s, target.device)))
        form = (f"chain k<={setting['k']}, stops below path probability {setting['min_path_prob']}"
                + (" (tuned)" if saved else ""))
        return Method(name, form, run, drafter)  # chains of varying length: τ predicted like a tree's

    def tree(drafter, branching, name, form=None):
        if all(w == 1 for w in branching):
            return chain(drafter, len(branching), name, form and form.replace("tree", "chain"))
        run = lambda p, n, t, s: _spec(tree_speculative_generate(  # noqa: E731
            target, drafter, p, n, branching=branching, temperature=t, generator=_gen(s, target.device)))
        return Method(name, form or f"tree {list(branching)}", run, drafter, shape=tuple(branching))

    def dynamic(drafter, name):
        run = lambda p, n, t, s: _spec(dynamic_tree_speculative_generate(  # noqa: E731
            target, drafter, p, n, **DYNAMIC, temperature=t, generator=_gen(s, target.device)))
        form = f"dynamic tree (depth {DYNAMIC['depth']}, top_k {DYNAMIC['top_k']}, {DYNAMIC['total_tokens']} tokens)"
        return Method(name, form, run, drafter)

    def with_tuned(key, name, drafter, fixed: Method, fallback_k: int | None = None):
        methods.append(fixed)
        if key in tuned:
            tuned_drafter, shape, saved = tuned[key]
            same = next((m for m in methods if m.name == name and m.shape == tuple(shape)), None)
            if same is not None and not saved.get("draft_vocab"):  # tuning kept a fixed row's shape: one row
                same.form += " (= tuned)"
                return
            kind = f"chain k={len(shape)}" if all(w == 1 for w in shape) else f"tree {shape}"
            vocab = f", draft vocab {saved['draft_vocab']}" if saved.get("draft_vocab") else ""
            methods.append(tree(tuned_drafter, shape, f"{name} (tuned)", f"{kind} (tuned{vocab})"))
        elif fallback_k is not None:
            methods.append(chain(drafter, fallback_k, name, f"chain k={fallback_k} (shape row; no tuned file)"))

    methods.append(Method("plain greedy (mini_llm)", "1 token / call", lambda p, n, t, s: (
        generate(target, torch.tensor([p], device=target.device), n, temperature=t,
                 generator=_gen(s, target.device))[0].tolist(),
        None)))
    ngram = NGramDrafter(target.cfg.vocab_size, device=target.device)
    methods.append(chain(ngram, CHAIN_K + 1, "n-gram / prompt lookup"))
    try:
        from .lookahead import LookaheadDrafter, lookahead_generate
    except ImportError:
        skipped.append("lookahead decoding: tree_spec.lookahead not available")
    else:
        if greedy:
            look = LookaheadDrafter(target.cfg.vocab_size, device=target.device)
            methods.append(Method(
                "lookahead decoding", f"window {look.window}, {look.ngram}-grams, {look.candidates} candidates",
                lambda p, n, t, s: _spec(lookahead_generate(target, p, n, drafter=look)), look))
        else:
            skipped.append("lookahead decoding: greedy only")
    if draft is not None:
        small = ModelDrafter(draft)
        methods.append(chain(small, CHAIN_K, "small model"))
        with_tuned("small", "small model", small, tree(small, SMALL_TREE, "small model"))
    else:
        skipped.append("small model: no draft model")
    quantized = QuantizedSelfDrafter(target)
    with_tuned("int4", "quantized self (INT4)", quantized, tree(quantized, SMALL_TREE, "quantized self (INT4)"))
    for kind, name, make, fallback, confidence_row in (
        ("medusa", "Medusa heads", lambda d, nm: tree(d, MEDUSA_TREE, nm), None, False),
        ("eagle", "EAGLE-1", lambda d, nm: tree(d, EAGLE_TREE, nm), FALLBACK_CHAIN_K, True),
        ("eagle", "EAGLE-2", dynamic, None, False),
        ("eagle3", "EAGLE-3 style", dynamic, None, False),
        ("mtp", "MTP module", lambda d, nm: chain(d, CHAIN_K, nm), FALLBACK_CHAIN_K, True),
    ):
        folder = heads_dir / kind
        if not (folder / "head.safetensors").is_file():
            skipped.append(f"{name}: no trained head in {folder}")
            continue
        drafter = load_head(folder, target)
        tuned_key = None if name == "EAGLE-2" else kind  # EAGLE-2's tuned rival is EAGLE-1's tuned static tree
        if tuned_key is None:
            methods.append(make(drafter, name))
        else:
            with_tuned(tuned_key, name, drafter, make(drafter, name), fallback)
        if confidence_row:
            methods.append(confident_chain(kind, tuned[kind][0] if kind in tuned else drafter, f"{name}, confidence stop"))
    return methods, skipped


def hf_methods(target_path: Path, draft_path: Path | None, device: torch.device | str = "cpu") -> list[Method]:
    """transformers baselines on the same checkpoints and device: generate, assisted generation, prompt lookup."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):  # built where it runs, whatever torch's default device is
        hf_target = AutoModelForCausalLM.from_pretrained(target_path, dtype=torch.float32).eval()
    hf_target.generation_config.eos_token_id = None  # fixed length, like the mini_llm runs

    def run(**kwargs) -> Runner:
        def go(p: list[int], n: int, t: float, s: int):
            torch.manual_seed(s)
            with torch.inference_mode():
                out = hf_target.generate(torch.tensor([p], device=device),
                                         attention_mask=torch.ones(1, len(p), dtype=torch.long, device=device),
                                         max_new_tokens=n, do_sample=t > 0, temperature=t if t > 0 else None,
                                         top_k=None, top_p=None, pad_token_id=0, **kwargs)
            return out[0, len(p):].tolist(), None
        return go

    methods = [Method("transformers generate", "1 token / call", run())]
    if draft_path is not None:
        with torch.device(device):
            hf_draft = AutoModelForCausalLM.from_pretrained(draft_path, dtype=torch.float32).eval()
        hf_draft.generation_config.eos_token_id = None
        methods.append(Method("transformers assisted", "assistant_model=draft", run(assistant_model=hf_draft)))
    lookup = run(prompt_lookup_num_tokens=10)
    methods.append(Method("transformers prompt lookup", "prompt_lookup_num_tokens=10", lookup))
    return methods


def run_bench(methods: list[Method], prompts: list[list[int]], new_tokens: int, temperature: float, seed: int,
              target: Transformer, timer: ForwardTimer | None = None) -> None:
    """Run every method on every prompt, interleaved; accumulate each method's counters and time breakdown
    (prefill, verify forwards, drafter work; thread CPU time, or synchronized wall time when the target is on
    CUDA) in place. After each prompt, `timer` samples the target's cost curve once more, so the curve is
    measured under the same conditions as the runs."""
    for method in methods:  # warm-up: lazy imports, allocator, first-call overheads
        method.run(prompts[0][:16], 4, temperature, seed)
    if timer is not None:
        timer.sample(1)
    bar = tqdm(total=len(prompts) * len(methods), desc="bench", unit="run", disable=None)
    wall_start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        reference = None
        for method in methods:
            (tokens, out), split = time_split(lambda: method.run(prompt, new_tokens, temperature, seed + i), target,
                                              method.drafter)
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
            timer.sample(1)
        if bar.disable:  # no terminal (a background run with a log): one line per prompt instead
            print(f"prompt {i + 1}/{len(prompts)} done, {time.perf_counter() - wall_start:.0f} s", flush=True)
    bar.close()


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
    gap = predicted / measured - 1
    note = "within ±15 %"
    if abs(gap) > TOLERANCE:
        terms = []
        if abs(verify_measured / verify_curve - 1) > 0.1:
            terms.append(f"verify measured {verify_measured:.2f} vs curve {verify_curve:.2f} ms/pass (the curve times "
                         f"forwards back to back at {curve.context} cached tokens; in the loop each verify follows "
                         "draft work: tree_spec.costs.forward_after measures both)")
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
        overhead_ms_per_pass=overhead, predicted_ms_per_token=predicted, measured_ms_per_token=measured, gap=gap,
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


def machine(device: torch.device | str = "cpu") -> str:
    import platform

    return (f"{hardware_name(device)}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
            f"{platform.system()}")


def _depths(values: list[float] | None) -> str:
    return "—" if not values else " / ".join(f"{v:.2f}" for v in values)


MODEL_BASED = ("small model", "quantized self", "Medusa", "EAGLE", "MTP")


def tuned_vs_fixed(rows: list[dict]) -> list[str]:
    """Markdown lines: each tuned row against the fastest fixed-shape row of its drafter (same run), and the
    fastest model-based drafter (small model, INT4 self, Medusa, EAGLE-1/2/3, MTP) against plain greedy."""
    lines = ["", "## Tuned shapes against fixed ones, and the fastest model-based drafter (this run)", ""]
    for r in rows:
        if r["form"].endswith("(= tuned)"):
            lines.append(f"- {r['method']}: tuning kept the fixed shape ({r['form']}); one row.")
        if not r["method"].endswith(" (tuned)"):
            continue
        fixed = [f for f in rows if f["method"] == r["method"].removesuffix(" (tuned)")]
        if not fixed:
            continue
        best = min(fixed, key=lambda f: f["ms_per_token"])
        verdict = "at least as fast" if r["ms_per_token"] <= best["ms_per_token"] else "SLOWER"
        lines.append(f"- {r['method']}: {r['form']} {r['ms_per_token']:.2f} ms/token vs the fixed {best['form']} "
                     f"{best['ms_per_token']:.2f}: {verdict}.")
    model_based = [r for r in rows if r["method"].startswith(MODEL_BASED)]
    if model_based:
        top = max(model_based, key=lambda r: r["speedup"])
        lines.append(f"- Fastest model-based drafter: {top['method']}, {top['form']}: {top['speedup']:.2f}x plain greedy.")
    return lines if len(lines) > 3 else []


def markdown(result: dict) -> str:
    """The result as Markdown: the main table, the cost curve and the reconciliation table."""
    fmt = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
    greedy = result["temperature"] == 0
    clock = result["clock"]
    lines = [
        f"# Benchmark: every draft source on `{result['target']}` (temperature {result['temperature']})", "",
        f"{result['prompts']} held-out prompts x {result['new_tokens']} new tokens, batch 1, fp32, on "
        f"{result['machine']} (device {result['device']}); methods interleaved per prompt; ms/token = {clock} / "
        f"tokens; speedup = plain mini_llm greedy ms/token / method ms/token (same run).",
        "",
        "τ = tokens per target call counting the target's own token (plain = 1.00). Two acceptance rates: "
        "α = the per-position rate (depth d accepted given every shallower depth was; the α of "
        "E = (1 − α^(k+1)) / (1 − α)); ratio = accepted / proposed draft tokens (vLLM's counter; for a chain "
        "τ = 1 + k · ratio). α per depth = α at depth 1 / 2 / .... identical = prompts whose tokens equal plain "
        f"{'greedy' if greedy else 'sampling (not expected)'}. \"confidence stop\" rows: chains that draft up to k "
        "tokens and stop once the draft's path probability (the product of its probabilities of its own tokens) "
        "falls below θ (EAGLE-2's rule on a chain), so k varies per pass and τ = 1 + (drafts per pass) · ratio.",
        "",
        "| method | form | τ | α (per-position) | acceptance ratio | α per depth | target calls | draft calls | "
        "ms/token | speedup | identical |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['form']} | {fmt(r['tau'], '.2f')} | {fmt(r['alpha'], '.2f')} | "
            f"{fmt(r['acceptance_ratio'], '.2f')} | {_depths(r['alpha_at_depth'])} | {fmt(r['target_calls'], 'd')} | "
            f"{fmt(r['draft_calls'], 'd')} | {r['ms_per_token']:.2f} | {r['speedup']:.2f}x | "
            f"{r['identical']}/{result['prompts']} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"]) + "."]
    lines += tuned_vs_fixed(result["rows"])
    curve = CostCurve.from_dict(result["cost_curve"]) if result.get("cost_curve") else None
    if curve is not None:
        points = ", ".join(f"{n}: {m:.2f}" for n, m in zip(curve.new_tokens, curve.ms_points))
        lines += [
            "", "## The target's cost curve (measured in this run)", "",
            f"One target forward over n new tokens after {curve.context} cached tokens, {curve.method} of "
            f"{curve.repeats} samples taken between the prompts (ms): {points}. Fit for n >= 2: "
            f"{curve.intercept_ms:.2f} + {curve.slope_ms:.3f}·n ms. A verify over 5 tokens costs "
            f"{curve.relative(5):.2f} decode steps, over 25 tokens {curve.relative(25):.2f}: not free on this machine.",
        ]
        lines += [
            "", "## Reconciliation: predicted vs measured ms/token", "",
            "Per method: the measured per-depth acceptance (chains: α at depth d; trees: the fraction of verify "
            "passes that accepted depth d) gives the predicted tokens per pass τ̂ = 1 + α1 + α1·α2 + ... (chains) or "
            "1 + Σ_d acceptance at depth d (trees). Predicted ms/token = (prefills from the curve + "
            "(tokens − prompts) / τ̂ × (draft ms per pass + verify ms per pass from the curve at each pass's node "
            f"count)) / tokens. Draft ms per pass: {clock} inside the drafter's calls in this run. Overhead = "
            "measured total − prefill − verify forwards − drafter work, per pass (not in the model). "
            f"Gap = predicted / measured − 1; rows outside ±{TOLERANCE:.0%} say which term is off.",
            "",
            "| method | form | per-depth acceptance | τ̂ per pass | measured τ per pass | nodes/pass | draft ms/pass | "
            "verify ms/pass (curve) | verify ms/pass (measured) | overhead ms/pass | predicted ms/token | "
            "measured ms/token | gap | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in result["rows"]:
            c = r.get("reconciliation")
            if c is None:
                continue
            lines.append(
                f"| {r['method']} | {r['form']} | {_depths(c['per_depth'])} | {c['predicted_tau']:.2f} | "
                f"{c['measured_tau_per_pass']:.2f} | {c['nodes_per_pass']:.1f} | {c['draft_ms_per_pass']:.2f} | "
                f"{c['verify_ms_per_pass_curve']:.2f} | {c['verify_ms_per_pass_measured']:.2f} | "
                f"{c['overhead_ms_per_pass']:.2f} | {c['predicted_ms_per_token']:.2f} | "
                f"{c['measured_ms_per_token']:.2f} | {c['gap']:+.1%} | {c['note']} |"
            )
        lines += ["", "The transformers baselines run their own loop (not instrumented): no reconciliation row."]
    lines += ["", f"Command: `{result['command']}`", ""]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

    rows = result["rows"]
    labels = [f"{r['method']}\n{r['form']}" for r in rows]
    fig = Figure(figsize=(13, 0.45 * len(rows) + 1.5))
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    ax1.barh(labels, [r["speedup"] for r in rows], color="tab:blue")
    ax1.axvline(1.0, color="gray", lw=1)
    ax1.set(xlabel=f"speedup vs plain mini_llm greedy (same run, {result['clock']})")
    ax2.barh(labels, [r["tau"] or 0 for r in rows], color="tab:green")
    ax2.set(xlabel="τ: tokens per target call")
    ax1.invert_yaxis()
    fig.suptitle(f"{result['target']}, temperature {result['temperature']}, {result['prompts']} prompts x "
                 f"{result['new_tokens']} tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="tiny-qwen3")
    p.add_argument("--draft", default="tiny-qwen3-draft", help="separate small draft model ('none' to skip)")
    p.add_argument("--heads", default=str(MODELS_DIR / "heads"), help="folder with <kind>/ head folders")
    p.add_argument("--tuned", default=str(TUNED_DIR), help="folder of tuned shapes ('none' to skip)")
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: thread CPU time = all work)")
    p.add_argument("--device", default="cpu", help="where the models run: cpu (thread CPU time) or cuda (wall time "
                                                   "after torch.cuda.synchronize())")
    p.add_argument("--out", default=str(MODELS_DIR), help="output folder (default models/)")
    p.add_argument("--no-transformers", action="store_true", help="skip the transformers baselines")
    p.add_argument("--quick", action="store_true", help="1 prompt x 16 tokens (for tests)")
    p.add_argument("--batch", help="batch sizes, e.g. 1,4,16: plain vs speculative tokens/s per batch size instead "
                                   "(tree_spec.batch.batch_benchmark; writes BENCHMARK_BATCH.md)")
    args = p.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: no CUDA GPU is visible to torch")
    n_prompts, new_tokens = (1, 16) if args.quick else (args.prompts, args.new_tokens)

    threads_before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        if args.batch:
            return batch_benchmark(args.target, args.draft, [int(b) for b in args.batch.split(",")], n_prompts,
                                   new_tokens, out_dir=args.out, device=args.device)
        target_path = resolve_model_path(args.target)
        draft_path = None if args.draft == "none" else resolve_model_path(args.draft)
        target = load_model(target_path, device=args.device)
        draft = load_model(draft_path, device=args.device) if draft_path else None
        prompts = held_out_prompts(load_tokenizer(target_path), n_prompts)
        tuned_dir = None if args.tuned == "none" else Path(args.tuned)
        methods, skipped = spec_methods(target, draft, Path(args.heads), tuned_dir, greedy=args.temperature == 0,
                                        model_name=str(args.target))
        if args.no_transformers:
            skipped.append("transformers baselines: --no-transformers")
        else:
            methods += hf_methods(target_path, draft_path, args.device)
        mean_prompt = sum(map(len, prompts)) // len(prompts)
        sizes = DEFAULT_NEW_TOKENS if not args.quick else (1, 2, 4, 8, 16)
        lengths = sorted(map(len, prompts))
        prefill_sizes = (lengths[0], lengths[len(lengths) // 2], lengths[-1])  # the curve interpolates between them
        timer = ForwardTimer(target, sorted({*sizes, *prefill_sizes}),
                             context=mean_prompt + new_tokens // 2)
        print(f"{len(methods)} methods x {n_prompts} prompts x {new_tokens} tokens, temperature {args.temperature}, "
              f"{torch.get_num_threads()} torch thread(s), {target.device}: {clock_name(target.device)}")
        run_bench(methods, prompts, new_tokens, args.temperature, args.seed, target, timer)
        curve = timer.curve(str(args.target))
        result = dict(
            target=str(args.target), draft=str(args.draft), temperature=args.temperature, prompts=n_prompts,
            new_tokens=new_tokens, machine=machine(target.device), device=str(target.device),
            clock=clock_name(target.device), skipped=skipped, rows=summarize(methods, curve),
            cost_curve=curve.to_dict(),
            command="python -m tree_spec.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        )
    finally:
        torch.set_num_threads(threads_before)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "BENCHMARK" if args.temperature == 0 else f"BENCHMARK_T{args.temperature:g}"
    text = markdown(result)
    (out / f"{stem}.md").write_text(text)
    (out / f"{stem.lower()}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out / f"{stem.lower()}.png")
    print(text)
    return result


if __name__ == "__main__":
    main()
