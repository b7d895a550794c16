"""Every draft source on one harness: the same held-out prompts, the same target, one machine, one run.

    python -m tree_spec.bench [--target tiny-qwen3] [--draft tiny-qwen3-draft] [--heads models/heads]
                              [--prompts 16] [--new-tokens 128] [--temperature 0.0] [--out models] [--quick]

Methods run interleaved per prompt (plain greedy, then each method, prompt after prompt), so their
ms/token ratios come from the same conditions. Columns: τ (tokens per target call, counting the
target's own token), α (accepted / proposed draft tokens), target and draft calls, ms/token,
speedup vs plain mini_llm greedy, and how many prompts give tokens identical to plain greedy.
With `--temperature 1.0` every method samples through the lossless verifiers (identity not expected).
Methods whose head folder is missing are listed as skipped. Writes BENCHMARK*.md, .json and .png.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.load import MODELS_DIR, resolve_model_path

from .chain import speculative_generate
from .drafters import ModelDrafter, QuantizedSelfDrafter
from .dynamic import dynamic_tree_speculative_generate
from .head_io import load_head
from .ngram import NGramDrafter
from .output import SpecOutput
from .prompts import held_out_prompts
from .tree import tree_speculative_generate

# run(prompt, max_new_tokens, temperature, seed) -> (new tokens, SpecOutput or None)
Runner = Callable[[list[int], int, float, int], tuple[list[int], SpecOutput | None]]

CHAIN_K = 4
SMALL_TREE = [2, 2, 1, 1]
MEDUSA_TREE = [3, 2, 2, 1]
EAGLE_TREE = [3, 2, 1, 1, 1]
DYNAMIC = dict(depth=6, top_k=4, total_tokens=24)


@dataclass
class Method:
    name: str
    form: str
    run: Runner
    totals: dict = field(default_factory=lambda: dict(tokens=0, seconds=0.0, target_calls=0, draft_calls=0,
                                                      accepted=0, proposed=0, identical=0, spec=False))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def spec_methods(target: Transformer, draft: Transformer | None, heads_dir: Path) -> tuple[list[Method], list[str]]:
    """mini_llm methods in their natural form; returns (methods, names of skipped methods with the reason)."""
    methods: list[Method] = []
    skipped: list[str] = []

    def chain(drafter, k):
        return lambda p, n, t, s: _spec(speculative_generate(target, drafter, p, n, k=k, temperature=t,
                                                             generator=_gen(s)))

    def tree(drafter, branching):
        return lambda p, n, t, s: _spec(tree_speculative_generate(target, drafter, p, n, branching=branching,
                                                                  temperature=t, generator=_gen(s)))

    def dynamic(drafter):
        return lambda p, n, t, s: _spec(dynamic_tree_speculative_generate(target, drafter, p, n, **DYNAMIC,
                                                                          temperature=t, generator=_gen(s)))

    methods.append(Method("plain greedy (mini_llm)", "1 token / call", lambda p, n, t, s: (
        generate(target, torch.tensor([p]), n, temperature=t, generator=_gen(s))[0].tolist(), None)))
    ngram = NGramDrafter(target.cfg.vocab_size, device=target.device)
    methods.append(Method("n-gram / prompt lookup", f"chain k={CHAIN_K + 1}", chain(ngram, CHAIN_K + 1)))
    if draft is not None:
        methods.append(Method("small model", f"chain k={CHAIN_K}", chain(ModelDrafter(draft), CHAIN_K)))
        methods.append(Method("small model", f"tree {SMALL_TREE}", tree(ModelDrafter(draft), SMALL_TREE)))
    else:
        skipped.append("small model: no draft model")
    quantized = QuantizedSelfDrafter(target)
    methods.append(Method("quantized self (INT4)", f"tree {SMALL_TREE}", tree(quantized, SMALL_TREE)))
    dyn = f"dynamic tree (depth {DYNAMIC['depth']}, top_k {DYNAMIC['top_k']}, {DYNAMIC['total_tokens']} tokens)"
    for kind, name, form, make in (
        ("medusa", "Medusa heads", f"tree {MEDUSA_TREE}", lambda d: tree(d, MEDUSA_TREE)),
        ("eagle", "EAGLE-1", f"tree {EAGLE_TREE}", lambda d: tree(d, EAGLE_TREE)),
        ("eagle", "EAGLE-2", dyn, dynamic),
        ("eagle3", "EAGLE-3 style", dyn, dynamic),
        ("mtp", "MTP module", f"chain k={CHAIN_K}", lambda d: chain(d, CHAIN_K)),
    ):
        folder = heads_dir / kind
        if not (folder / "head.safetensors").is_file():
            skipped.append(f"{name}: no trained head in {folder}")
            continue
        methods.append(Method(name, form, make(load_head(folder, target))))
    return methods, skipped


def hf_methods(target_path: Path, draft_path: Path | None) -> list[Method]:
    """transformers baselines on the same checkpoints: generate, assisted generation, prompt lookup."""
    from transformers import AutoModelForCausalLM

    hf_target = AutoModelForCausalLM.from_pretrained(target_path, dtype=torch.float32).eval()
    hf_target.generation_config.eos_token_id = None  # fixed length, like the mini_llm runs

    def run(**kwargs) -> Runner:
        def go(p: list[int], n: int, t: float, s: int):
            torch.manual_seed(s)
            with torch.inference_mode():
                out = hf_target.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                         max_new_tokens=n, do_sample=t > 0, temperature=t if t > 0 else None,
                                         top_k=None, top_p=None, pad_token_id=0, **kwargs)
            return out[0, len(p):].tolist(), None
        return go

    methods = [Method("transformers generate", "1 token / call", run())]
    if draft_path is not None:
        hf_draft = AutoModelForCausalLM.from_pretrained(draft_path, dtype=torch.float32).eval()
        hf_draft.generation_config.eos_token_id = None
        methods.append(Method("transformers assisted", "assistant_model=draft", run(assistant_model=hf_draft)))
    lookup = run(prompt_lookup_num_tokens=10)
    methods.append(Method("transformers prompt lookup", "prompt_lookup_num_tokens=10", lookup))
    return methods


def _spec(out: SpecOutput) -> tuple[list[int], SpecOutput]:
    return out.tokens, out


def run_bench(methods: list[Method], prompts: list[list[int]], new_tokens: int, temperature: float, seed: int) -> None:
    """Run every method on every prompt, interleaved; accumulate each method's totals in place."""
    for method in methods:  # warm-up: lazy imports, allocator, first-call overheads
        method.run(prompts[0][:16], 4, temperature, seed)
    bar = tqdm(total=len(prompts) * len(methods), desc="bench", unit="run")
    for i, prompt in enumerate(prompts):
        reference = None
        for method in methods:
            start = time.perf_counter()
            tokens, out = method.run(prompt, new_tokens, temperature, seed + i)
            seconds = time.perf_counter() - start
            reference = tokens if reference is None else reference
            t = method.totals
            t["tokens"] += len(tokens)
            t["seconds"] += seconds
            t["identical"] += tokens == reference
            if out is not None:
                t["spec"] = True
                t["target_calls"] += out.target_calls
                t["draft_calls"] += out.draft_calls
                t["accepted"] += sum(out.accepted_per_call)
                t["proposed"] += out.proposed
            else:
                t["target_calls"] += len(tokens) if method.name.startswith("plain") else 0
            bar.update(1)
    bar.close()


def summarize(methods: list[Method]) -> list[dict]:
    """One row per method: τ, α, calls, ms/token, speedup vs the first method (plain greedy), identical."""
    base = methods[0].totals
    base_ms = 1000 * base["seconds"] / base["tokens"]
    rows = []
    for m in methods:
        t = m.totals
        ms = 1000 * t["seconds"] / t["tokens"]
        rows.append(dict(
            method=m.name, form=m.form,
            tau=t["tokens"] / t["target_calls"] if t["target_calls"] else None,
            alpha=t["accepted"] / t["proposed"] if t["proposed"] else None,
            target_calls=t["target_calls"] or None, draft_calls=t["draft_calls"] if t["spec"] else None,
            ms_per_token=ms, speedup=base_ms / ms, identical=t["identical"], tokens=t["tokens"],
        ))
    return rows


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{cpu}, {torch.get_num_threads()} torch threads, torch {torch.__version__}, {platform.system()}"


def markdown(result: dict) -> str:
    """The result as a Markdown section with a table."""
    fmt = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
    lines = [
        f"# Benchmark: every draft source on `{result['target']}` (temperature {result['temperature']})", "",
        f"{result['prompts']} held-out prompts x {result['new_tokens']} new tokens, batch 1, fp32, "
        f"on {result['machine']}; "
        f"methods interleaved per prompt, speedup = plain mini_llm greedy ms/token / method ms/token (same run). "
        f"τ = tokens per target call counting the target's own token (plain = 1.00); α = accepted / proposed "
        f"draft tokens; identical = prompts whose tokens equal plain "
        f"{'greedy' if result['temperature'] == 0 else 'sampling (not expected)'}.",
        "",
        "| method | form | τ | α | target calls | draft calls | ms/token | speedup | identical |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['form']} | {fmt(r['tau'], '.2f')} | {fmt(r['alpha'], '.2f')} | "
            f"{fmt(r['target_calls'], 'd')} | {fmt(r['draft_calls'], 'd')} | {r['ms_per_token']:.2f} | "
            f"{r['speedup']:.2f}x | {r['identical']}/{result['prompts']} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"]) + "."]
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
    ax1.set(xlabel="speedup vs plain mini_llm greedy (same run)")
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
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(MODELS_DIR), help="output folder (default models/)")
    p.add_argument("--no-transformers", action="store_true", help="skip the transformers baselines")
    p.add_argument("--quick", action="store_true", help="2 prompts x 16 tokens (for tests)")
    args = p.parse_args(argv)
    n_prompts, new_tokens = (2, 16) if args.quick else (args.prompts, args.new_tokens)

    target_path = resolve_model_path(args.target)
    draft_path = None if args.draft == "none" else resolve_model_path(args.draft)
    target = load_model(target_path)
    draft = load_model(draft_path) if draft_path else None
    prompts = held_out_prompts(load_tokenizer(target_path), n_prompts)
    methods, skipped = spec_methods(target, draft, Path(args.heads))
    if args.no_transformers:
        skipped.append("transformers baselines: --no-transformers")
    else:
        methods += hf_methods(target_path, draft_path)
    print(f"{len(methods)} methods x {n_prompts} prompts x {new_tokens} tokens, temperature {args.temperature}")
    run_bench(methods, prompts, new_tokens, args.temperature, args.seed)
    result = dict(
        target=str(args.target), draft=str(args.draft), temperature=args.temperature, prompts=n_prompts,
        new_tokens=new_tokens, machine=machine(), skipped=skipped, rows=summarize(methods),
        command="python -m tree_spec.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
    )
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
