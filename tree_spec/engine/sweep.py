"""A load sweep of vLLM's OpenAI-compatible server on the course's model, with and without speculation.

    python -m tree_spec.engine.sweep                       # writes models/serving_sweep.json (about 4 minutes)
    python -m tree_spec.engine.sweep --concurrency 1 4 --prompts 8 --out /tmp/sweep.json

For each speculative config (none, prompt lookup, the small draft model, the EAGLE-3 head exported by
`eagle3_export`) the server starts once; vLLM's serving
benchmark then sends the held-out prompts at each concurrency (that many requests in flight, the next sent as one
finishes), `repeats` times, and reports TTFT, TPOT (time per output token after the first), mean and P99
inter-token latency (ITL: the gap between two streamed chunks; with speculation a chunk carries every token one step
accepted), output throughput and acceptance. The server's kernels run on core 0, the load generator on the rest.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mini_llm import load_tokenizer

from ..analysis.prompts import held_out_prompts
from . import env
from .eagle3_export import DEFAULT_HEAD, DEFAULT_OUT, export_eagle3
from .server import engine_environ, serve

ROOT = env.ROOT
MODEL = ROOT / "models" / "tiny-qwen3"
CONFIGS: dict[str, dict | None] = {
    "plain": None,
    "prompt lookup": {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 3, "prompt_lookup_min": 1},
    "draft model": {"method": "draft_model", "model": str(ROOT / "models" / "tiny-qwen3-draft"),
                    "num_speculative_tokens": 4},
    "EAGLE-3 head": {"method": "eagle3", "model": str(DEFAULT_OUT), "num_speculative_tokens": 3},
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


def sweep(concurrencies: list[int], prompts: int = 16, new_tokens: int = 64, repeats: int = 3,
          configs: dict[str, dict | None] = CONFIGS) -> dict:
    """Every config at every concurrency, `repeats` times in a row -> {"setup": ..., "rows": [{"config",
    "concurrency", "repeat", figures...}]}."""
    tokenizer = load_tokenizer(MODEL)
    if any(config and config.get("model") == str(DEFAULT_OUT) for config in configs.values()):
        export_eagle3(DEFAULT_HEAD, MODEL, DEFAULT_OUT)  # derived from the shipped head: written afresh
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        dataset = Path(tmp, "prompts.jsonl")
        dataset.write_text("".join(json.dumps({"prompt": tokenizer.decode(p)}) + "\n"
                                   for p in held_out_prompts(tokenizer, prompts)))
        for name, config in configs.items():
            with serve(MODEL, config, threads=1) as url:
                for c in concurrencies:
                    for repeat in range(repeats):
                        start = time.monotonic()
                        rows.append({"config": name, "repeat": repeat,
                                     **bench_serve(url, MODEL, dataset, c, prompts, new_tokens)})
                        print(f"{name:>14}  concurrency {c}: {rows[-1]['output_throughput']:.0f} tok/s, TPOT "
                              f"{rows[-1]['mean_tpot_ms']:.2f} ms, mean ITL {rows[-1]['mean_itl_ms']:.2f} ms, P99 ITL "
                              f"{rows[-1]['p99_itl_ms']:.2f} ms ({time.monotonic() - start:.0f} s)", flush=True)
    setup = {"model": "models/tiny-qwen3", "prompts": prompts, "new_tokens": new_tokens, "repeats": repeats,
             "engine": env.engine_name(),
             "server threads": 1, "configs": {k: v and {**v, "model": Path(v["model"]).name} if v and "model" in v
                                               else v for k, v in configs.items()},
             "command": "python -m tree_spec.engine.sweep"}
    return {"setup": setup, "rows": rows}


def spread(result: dict, config: str, concurrency: int, metric: str) -> tuple[float, float, float]:
    """(median, min, max) of `metric` over the repeats of one config at one concurrency."""
    values = [r[metric] for r in result["rows"] if r["config"] == config and r["concurrency"] == concurrency]
    if not values:
        raise KeyError(f"no sweep rows for {config!r} at concurrency {concurrency}")
    return statistics.median(values), min(values), max(values)


def ratio_verdict(result: dict, config: str, concurrency: int, metric: str, lower_is_better: bool) -> tuple[float, str]:
    """plain / config (lower is better) or config / plain (higher is better) for `metric` -> (median ratio, its
    verdict): "better" or "worse" when the ratio of the repeats' extremes stays on one side of 1, else "within noise"."""
    (p, p_lo, p_hi), (c, c_lo, c_hi) = (spread(result, name, concurrency, metric) for name in ("plain", config))
    if lower_is_better:
        ratio, lo, hi = p / c, p_lo / c_hi, p_hi / c_lo
    else:
        ratio, lo, hi = c / p, c_lo / p_hi, c_hi / p_lo
    return ratio, "better" if lo > 1 else "worse" if hi < 1 else "within noise"


def sweep_verdicts(result: dict) -> list[str]:
    """The serving rules, each as a sentence computed from the sweep: per-token latency, chunk gaps (mean and P99
    ITL) and the throughput gain at the lowest and highest concurrency, every speculative config against plain."""
    levels = sorted({r["concurrency"] for r in result["rows"]})
    low, high = levels[0], levels[-1]
    words = {"better": "{}", "worse": "{}", "within noise": "within noise"}
    lines = []
    for config in (c for c in result["setup"]["configs"] if c != "plain"):
        tpot, tpot_v = ratio_verdict(result, config, low, "mean_tpot_ms", True)
        itl, itl_v = ratio_verdict(result, config, low, "mean_itl_ms", True)
        p99, p99_v = ratio_verdict(result, config, low, "p99_itl_ms", True)
        gain_low, low_v = ratio_verdict(result, config, low, "output_throughput", False)
        gain_high, high_v = ratio_verdict(result, config, high, "output_throughput", False)
        lines.append(
            f"{config}, concurrency {low}: time per output token {1 / tpot:.2f}x plain's "
            f"({words[tpot_v].format('faster' if tpot_v == 'better' else 'slower')}); mean gap between streamed chunks "
            f"{1 / itl:.2f}x ({words[itl_v].format('shorter' if itl_v == 'better' else 'longer')}), P99 gap "
            f"{1 / p99:.2f}x ({words[p99_v].format('shorter' if p99_v == 'better' else 'longer')}); output throughput "
            f"{gain_low:.2f}x plain's ({words[low_v].format('a gain' if low_v == 'better' else 'a loss')}) at "
            f"concurrency {low}, {gain_high:.2f}x ({words[high_v].format('a gain' if high_v == 'better' else 'a loss')}) "
            f"at {high}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "serving_sweep.json")
    args = parser.parse_args()
    if min(*args.concurrency, args.prompts, args.tokens, args.repeats) < 1:
        parser.error("--concurrency, --prompts, --tokens and --repeats must be positive")
    result = sweep(args.concurrency, args.prompts, args.tokens, args.repeats)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
