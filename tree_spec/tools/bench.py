"""Every draft source on one harness: the same held-out prompts, the same target, one machine, one run.

    python -m tree_spec.tools.bench [--target tiny-qwen3] [--draft tiny-qwen3-draft] [--heads models/heads]
                                    [--tuned models/tuned] [--prompts 16] [--new-tokens 128] [--temperature 0.0]
                                    [--threads 1] [--device cpu] [--out models] [--quick] [--vllm-peer]

Methods run interleaved per prompt (plain greedy, then each method, prompt after prompt), so their
ms/token ratios come from the same conditions. Timing: one torch thread and the thread's CPU time
(`time.thread_time`), which leaves out the time other processes run, though not how they slow this thread
through shared caches and memory bandwidth (interleaving spreads that over all methods); with `--device cuda`,
wall time read after `torch.cuda.synchronize()` (`tree_spec.analysis.clocks.device_clock`).

Main table: τ (tokens per target call, counting the target's own token; plain = 1.00), α (the per-position
acceptance rate: depth d accepted given depths < d were), the acceptance ratio (accepted / proposed draft
tokens, vLLM's counter), α per depth, target and draft calls, ms/token, speedup vs plain mini_llm greedy,
and how many prompts give tokens identical to plain greedy. With `--temperature 1.0` every method samples
through the lossless verifiers (identity not expected).

Reconciliation table: the target's cost curve is measured in the same run (interleaved with the prompts);
per method, the measured per-depth acceptance gives the predicted tokens per pass, and
predicted ms/token = (prefills + passes × (draft ms per pass + verify ms from the curve at the pass's node
count)) / tokens, beside the measured ms/token. The note says which term is off when they differ by > 15 %.

Tree drafters also run with their tuned shape (rows "(tuned)") when `python -m tree_spec.tools.tune` saved one
under models/tuned/ (a fixed row whose shape tuning kept reads "(= tuned)": one configuration, one row); a
section compares each tuned row with its drafter's fixed rows and names the fastest model-based drafter.
EAGLE-1, the EAGLE-3 style head and MTP also run as confidence-stopped chains ("confidence stop":
`CONFIDENCE_STOP`, or the k and θ that `python -m tree_spec.tools.tune` saved, with the tuned draft vocabulary
when there is one): EAGLE-2's rule applied to a chain, a different decoder, not a shape. A tuned dynamic tree may
stop its expansion early the same way (Dynamic Depth Decoding's rule, `DynamicShape.min_path_prob`) when the tuner
found that faster; its form then reads "depth<=d, ..., stops below frontier path probability θ".
Methods whose head folder is missing are listed as skipped. `--vllm-peer` adds the peer section: vLLM's CPU build
on the same model and machine beside the course's loop, plain and each method both run, at batch 1 and 8, both in
wall time with one thread (`tree_spec.engine.peer`, about 6 minutes; it makes vLLM's environment on first use).
Writes BENCHMARK*.md, .json and .png.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from mini_llm import load_model, load_tokenizer
from mini_llm.load import MODELS_DIR, resolve_model_path

from ..analysis.clocks import clock_name
from ..analysis.curve import DEFAULT_NEW_TOKENS, ForwardTimer
from ..analysis.prompts import BENCH_NEW_TOKENS, BENCH_PROMPTS, held_out_prompts
from ..analysis.tuned import TUNED_DIR
from ..engine import env as vllm_env
from ..engine.peer import PEER_PROMPTS, PEER_TOKENS, peer_result
from .args import POSITIVE_INT, positive_ints, ranged
from .bench_batch import batch_benchmark
from .bench_methods import hf_methods, spec_methods
from .bench_report import machine, markdown, plot
from .bench_run import run_bench, summarize
from .named_drafters import vocab_coverage


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="tiny-qwen3")
    p.add_argument("--draft", default="tiny-qwen3-draft", help="separate small draft model ('none' to skip)")
    p.add_argument("--heads", default=str(MODELS_DIR / "heads"), help="folder with <kind>/ head folders")
    p.add_argument("--tuned", default=str(TUNED_DIR), help="folder of tuned shapes ('none' to skip)")
    p.add_argument("--prompts", type=POSITIVE_INT, default=BENCH_PROMPTS)
    p.add_argument("--new-tokens", type=POSITIVE_INT, default=BENCH_NEW_TOKENS)
    p.add_argument("--temperature", type=ranged(float, lambda t: t >= 0, ">= 0 (0 = greedy)"), default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=POSITIVE_INT, default=1, help="torch threads (default 1: thread CPU time = all work)")
    p.add_argument("--device", default="cpu", help="where the models run: cpu (thread CPU time) or cuda (wall time "
                                                   "after torch.cuda.synchronize())")
    p.add_argument("--out", default=str(MODELS_DIR), help="output folder (default models/)")
    p.add_argument("--no-transformers", action="store_true", help="skip the transformers baselines")
    p.add_argument("--quick", action="store_true", help="1 prompt x 16 tokens (for tests)")
    p.add_argument("--vllm-peer", action="store_true", help="add vLLM's rows beside the course loop's (greedy, CPU only; "
                                                            "tree_spec.engine.peer)")
    p.add_argument("--batch", type=positive_ints, help="batch sizes, e.g. 1,4,16: plain vs speculative tokens/s per batch size instead "
                                   "(tree_spec.tools.bench_batch.batch_benchmark; writes BENCHMARK_BATCH.md)")
    args = p.parse_args(argv)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: no CUDA GPU is visible to torch")
    if args.vllm_peer and (args.temperature != 0 or args.device != "cpu" or args.batch):
        p.error("--vllm-peer compares greedy decoding on the CPU at batch 1 and 8: drop --temperature, --device, --batch")
    n_prompts, new_tokens = (1, 16) if args.quick else (args.prompts, args.new_tokens)
    try:
        target_path = resolve_model_path(args.target)
        draft_path = None if args.draft == "none" else resolve_model_path(args.draft)
    except FileNotFoundError as e:
        p.error(str(e))

    threads_before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        if args.batch:
            return batch_benchmark(args.target, args.draft, args.batch, n_prompts,
                                   new_tokens, out_dir=args.out, device=args.device)
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
        written = [t for tokens in run_bench(methods, prompts, new_tokens, args.temperature, args.seed, target, timer)
                   for t in tokens]
        vocabs = {len(v): v for m in methods if (v := getattr(m.drafter, "draft_vocab", None)) is not None}
        # the mean: the reconciliation predicts total time, the sum of many forwards (`ForwardTimer.curve`)
        curve = timer.curve(str(args.target), average="mean")
        result = dict(
            target=str(args.target), draft=str(args.draft), temperature=args.temperature, prompts=n_prompts,
            new_tokens=new_tokens, machine=machine(target.device), device=str(target.device),
            clock=clock_name(target.device), skipped=skipped, rows=summarize(methods, curve),
            draft_vocab_coverage=[dict(size=n, coverage=vocab_coverage(written, v)) for n, v in sorted(vocabs.items())],
            cost_curve=curve.to_dict(),
            command="python -m tree_spec.tools.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        )
        if args.vllm_peer:
            n_peer = (2, 8) if args.quick else (PEER_PROMPTS, PEER_TOKENS)
            result["vllm_peer"] = ({"skipped": vllm_env.unsupported_reason()} if vllm_env.unsupported_reason() else
                                   peer_result(target_path, draft_path, *n_peer))
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
