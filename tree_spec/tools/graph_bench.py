"""Eager loops vs fixed shapes vs CUDA graphs: what per-step overhead costs plain and chain decoding.

    python -m tree_spec.tools.graph_bench [--target tiny-qwen3] [--draft tiny-qwen3-draft] [--heads models/heads]
                                          [--prompts 8] [--new-tokens 128] [--ks 2,4,6] [--device cuda]
                                          [--out models] [--quick]

Three forms of the same decoding, for plain greedy, for chains drafted by the small model, EAGLE-1,
EAGLE-3 and MTP (the shipped heads), and for EAGLE-2 dynamic trees (EAGLE-1 head):
- "eager, lists": `generate` / `speculative_generate` / `dynamic_tree_speculative_generate`: Python lists,
  host reads inside every step;
- "fixed shapes, eager": `FixedShapeDecoder` / `FixedShapeChain` / `FixedShapeDynamicTree` with graphs=False: the
  fixed-shape step, one kernel launch at a time, one host read per step;
- "fixed shapes, CUDA graph" (CUDA only): the same step captured once and replayed.
One fixed-shape decoder per row serves every prompt (captured on its first request, in the warm-up).
Greedy; each row's tokens are checked against plain eager decoding, and the command fails (after writing its
tables) if any differ. Rows run interleaved per prompt; time is `device_clock` (thread CPU time on a CPU, one
torch thread; wall time after torch.cuda.synchronize() on CUDA). Speedups are given against plain eager
decoding and against plain decoding in the same form: a graphed chain must beat graphed plain decoding, the
baseline a GPU engine would otherwise run. Writes BENCHMARK_GRAPHS.md and benchmark_graphs.json under --out.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.graphs import FixedShapeDecoder, graphs_available
from mini_llm.load import MODELS_DIR, resolve_model_path

from ..analysis.clocks import clock_name, device_clock
from ..analysis.prompts import held_out_prompts
from ..core.output import SpecOutput
from ..decoding.chain import speculative_generate
from ..decoding.dynamic import dynamic_tree_speculative_generate
from ..drafters.base import Drafter
from ..drafters.head_io import load_head
from ..drafters.model import ModelDrafter
from ..fixed_shape.chain import FixedShapeChain
from ..fixed_shape.tree import FixedShapeDynamicTree
from .bench_report import machine

FORMS = ("eager, lists", "fixed shapes, eager", "fixed shapes, CUDA graph")
LIST_K = 4  # the k of the two eager chain rows; graphed chains run at every k of --ks
HEADS = (("EAGLE-1", "eagle"), ("EAGLE-3", "eagle3"), ("MTP", "mtp"))
# EAGLE-2 dynamic trees (EAGLE-1 head): the bench's CPU shape in every form, and a wider one graphed (on a
# launch-bound GPU a verify pass over 64 nodes costs about what one over 25 does)
TREE_SHAPES = (dict(depth=6, width=4, total_tokens=24), dict(depth=8, width=8, total_tokens=63))
QUICK_TREE = dict(depth=3, width=2, total_tokens=4)


@dataclass
class Row:
    """One benchmark row: run(prompt, new_tokens) -> (tokens, τ numerator and denominator). shape: k for a
    chain, (depth, width, total_tokens) for a tree, None for plain decoding."""

    method: str
    form: str
    shape: int | tuple[int, int, int] | None
    run: Callable[[list[int], int], tuple[list[int], int, int]]
    tokens: int = 0
    ms: float = 0.0
    target_calls: int = 0
    identical: int = 0
    prompts: int = 0
    results: dict = field(default_factory=dict)


def plain_rows(target: Transformer, max_len: int, graphs: bool) -> list[Row]:
    device = target.device
    eager = FixedShapeDecoder(target, max_len, graphs=False)

    def lists(prompt: list[int], n: int):
        tokens = generate(target, torch.tensor([prompt], device=device), n)[0].tolist()
        return tokens, len(tokens), len(tokens)

    def fixed(decoder: FixedShapeDecoder):
        def run(prompt: list[int], n: int):
            tokens = decoder.generate(prompt, n)[0].tolist()
            return tokens, len(tokens), len(tokens)
        return run

    rows = [Row("plain greedy", FORMS[0], None, lists), Row("plain greedy", FORMS[1], None, fixed(eager))]
    if graphs:
        rows.append(Row("plain greedy", FORMS[2], None, fixed(FixedShapeDecoder(target, max_len, graphs=True))))
    return rows


def spec_run(decode: Callable[[list[int], int], SpecOutput]) -> Callable[[list[int], int], tuple[list[int], int, int]]:
    """A row's run from a speculative decoder's (prompt, new_tokens) -> SpecOutput."""
    def run(prompt: list[int], n: int):
        out = decode(prompt, n)
        return out.tokens, len(out.tokens), out.target_calls
    return run


def chain_rows(name: str, target: Transformer, drafter: Drafter, max_len: int, ks: list[int], graphs: bool) -> list[Row]:
    """Chains: k = LIST_K in both eager forms, every k of `ks` graphed."""
    rows = [Row(name, FORMS[0], LIST_K, spec_run(lambda p, n: speculative_generate(target, drafter, p, n, k=LIST_K))),
            Row(name, FORMS[1], LIST_K, spec_run(FixedShapeChain(target, drafter, max_len, LIST_K, graphs=False).generate))]
    if graphs:
        rows += [Row(name, FORMS[2], k, spec_run(FixedShapeChain(target, drafter, max_len, k, graphs=True).generate))
                 for k in ks]
    return rows


def tree_rows(target: Transformer, drafter: Drafter, max_len: int, shapes: list[dict], graphs: bool) -> list[Row]:
    """EAGLE-2 dynamic trees: the first shape in both eager forms, every shape graphed."""
    name, first = "EAGLE-2 (EAGLE-1 head)", shapes[0]

    def label(shape: dict) -> tuple[int, int, int]:
        return shape["depth"], shape["width"], shape["total_tokens"]

    def fixed(shape: dict, graphs: bool):
        return spec_run(FixedShapeDynamicTree(target, drafter, max_len, **shape, graphs=graphs).generate)

    rows = [Row(name, FORMS[0], label(first),
                spec_run(lambda p, n: dynamic_tree_speculative_generate(target, drafter, p, n, **first))),
            Row(name, FORMS[1], label(first), fixed(first, False))]
    if graphs:
        rows += [Row(name, FORMS[2], label(shape), fixed(shape, True)) for shape in shapes]
    return rows


def run_rows(rows: list[Row], prompts: list[list[int]], new_tokens: int, device: torch.device) -> None:
    """Every row on every prompt, interleaved; the first row (plain eager) is the reference for identity."""
    clock = device_clock(device)
    for row in rows:  # warm-up: captures each fixed-shape row's graph (its first request), lazy initialisation
        row.run(prompts[0], min(new_tokens, 8))
    for prompt in tqdm(prompts, desc="graph bench", unit="prompt", disable=None):
        reference = None
        for row in rows:
            start = clock()
            tokens, n, calls = row.run(prompt, new_tokens)
            row.ms += 1000 * (clock() - start)
            reference = tokens if reference is None else reference
            row.tokens, row.target_calls = row.tokens + n, row.target_calls + calls
            row.identical += tokens == reference
            row.prompts += 1


def summarize(rows: list[Row]) -> list[dict]:
    plain = {r.form: r.ms / r.tokens for r in rows if r.method == "plain greedy"}
    out = []
    for r in rows:
        ms = r.ms / r.tokens
        out.append(dict(method=r.method, form=r.form, shape=r.shape, tau=r.tokens / r.target_calls, ms_per_token=ms,
                        vs_plain_eager=plain[FORMS[0]] / ms, vs_plain_same_form=plain[r.form] / ms,
                        identical=r.identical, prompts=r.prompts))
    return out


def markdown(result: dict) -> str:
    lines = [
        f"# Eager vs fixed shapes vs CUDA graphs ({result['target']}, {result['device']})",
        "",
        f"Measured by `{result['command']}` on {result['machine']}: {result['prompts']} held-out prompts x "
        f"{result['new_tokens']} new tokens, greedy; time = {result['clock']}. One run: compare rows with each other, "
        "not with another run.",
        "",
        "| method | form | k or tree (depth, width, total) | τ | ms/token | speedup vs plain eager | vs plain in the same form | identical |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        shape = "—" if r["shape"] is None else r["shape"]
        if isinstance(shape, list):
            shape = ", ".join(map(str, shape))
        lines.append(f"| {r['method']} | {r['form']} | {shape} | {r['tau']:.2f} | {r['ms_per_token']:.3f} | "
                     f"{r['vs_plain_eager']:.2f}x | {r['vs_plain_same_form']:.2f}x | {r['identical']}/{r['prompts']} |")
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"])]
    lines += ["", "τ: tokens per target forward, counting the target's own token (plain = 1.00). Forms: "
              "'eager, lists' = generate / speculative_generate / dynamic_tree_speculative_generate; "
              "'fixed shapes, eager' = FixedShapeDecoder / FixedShapeChain / FixedShapeDynamicTree without graphs (one host "
              "read per step, attention over all cache slots); "
              "'fixed shapes, CUDA graph' = the same step captured once and replayed (CUDA only)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="tiny-qwen3")
    p.add_argument("--draft", default="tiny-qwen3-draft", help="separate small draft model ('none' to skip)")
    p.add_argument("--heads", default=str(MODELS_DIR / "heads"), help="folder with <kind>/ head folders")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--ks", default="2,4,6", help="draft lengths of the graphed chain rows")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=str(MODELS_DIR))
    p.add_argument("--quick", action="store_true", help="2 prompts x 16 tokens, k = 2 (for tests)")
    args = p.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: no CUDA GPU is visible to torch")
    n_prompts, new_tokens = (2, 16) if args.quick else (args.prompts, args.new_tokens)
    ks = [2] if args.quick else [int(k) for k in args.ks.split(",")]
    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        target_path = resolve_model_path(args.target)
        target = load_model(target_path, device=args.device)
        prompts = held_out_prompts(load_tokenizer(target_path), n_prompts)
        shapes = [QUICK_TREE] if args.quick else list(TREE_SHAPES)
        max_len = max(map(len, prompts)) + new_tokens + max(ks + [LIST_K] + [s["total_tokens"] for s in shapes]) + 2
        graphs = graphs_available(target.device)
        rows, skipped = plain_rows(target, max_len, graphs), []
        if not graphs:
            skipped.append(f"CUDA graph rows: not on CUDA ({target.device})")
        if args.draft != "none":
            draft = load_model(resolve_model_path(args.draft), device=args.device)
            rows += chain_rows("small model", target, ModelDrafter(draft), max_len, ks, graphs)
        for name, kind in HEADS:
            folder = Path(args.heads) / kind
            if not (folder / "config.json").is_file():
                skipped.append(f"{name}: no head in {folder}")
                continue
            drafter = load_head(folder, target)
            rows += chain_rows(name, target, drafter, max_len, ks, graphs)
            if kind == "eagle":
                rows += tree_rows(target, drafter, max_len, shapes, graphs)
        print(f"{len(rows)} rows x {n_prompts} prompts x {new_tokens} tokens on {target.device}: {clock_name(target.device)}")
        run_rows(rows, prompts, new_tokens, target.device)
        result = dict(target=str(args.target), device=str(target.device), machine=machine(target.device),
                      clock=clock_name(target.device), prompts=n_prompts, new_tokens=new_tokens, skipped=skipped,
                      rows=summarize(rows),
                      command="python -m tree_spec.tools.graph_bench " + " ".join(argv if argv is not None else sys.argv[1:]))
    finally:
        torch.set_num_threads(threads_before)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (out / "BENCHMARK_GRAPHS.md").write_text(text)
    (out / "benchmark_graphs.json").write_text(json.dumps(result, indent=1) + "\n")
    print(text)
    differing = [f"{r['method']} ({r['form']})" for r in result["rows"] if r["identical"] < r["prompts"]]
    if differing:  # greedy decoding must reproduce plain greedy in every form: a bug, not noise
        raise SystemExit(f"tokens differ from plain greedy decoding: {', '.join(differing)}")
    return result


if __name__ == "__main__":
    main()
