"""Batch-1 greedy decode speed: mini_llm's `generate` vs transformers' `generate` on one checkpoint.

    python -m mini_llm.bench                      # the embedded target, models/tiny-qwen3
    python -m mini_llm.bench --model models/tiny-qwen3-draft --new-tokens 128 --repeats 5

Both run the same prompt for the same number of new tokens in fp32 on the same device, interleaved
(mini_llm, transformers, mini_llm, ...), and their tokens are asserted identical. Reports the median
ms/token of each, its range over the repeats, and their ratio (ratios from one run on one machine are what
to compare). On a CPU torch runs one thread and the clock is that thread's CPU time (`time.thread_time`),
as in `tree_spec.tools.bench`: another busy program on the machine then slows the timing far less than it
slows the wall clock. On CUDA it is wall time after `torch.cuda.synchronize()`.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from .generate import generate
from .load import DEFAULT_MODEL, resolve_model_path
from .model import Transformer


def random_checkpoint(folder: str) -> str:
    """A random tiny Qwen3 in HF format, for use before any trained model exists."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=8,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True)
    Qwen3ForCausalLM(cfg).save_pretrained(folder)
    return folder


def time_call(fn, device: str) -> tuple[float, torch.Tensor]:
    """(seconds, fn()): thread CPU time on a CPU, synchronized wall time on CUDA."""
    cuda = torch.device(device).type == "cuda"
    clock = time.perf_counter if cuda else time.thread_time
    if cuda:
        torch.cuda.synchronize()
    start = clock()
    out = fn()
    if cuda:
        torch.cuda.synchronize()
    return clock() - start, out


def run(model_path: str, new_tokens: int, prompt_len: int, repeats: int, device: str) -> dict:
    from transformers import AutoModelForCausalLM

    ours = Transformer.from_pretrained(model_path, dtype=torch.float32, device=device)
    theirs = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, ours.cfg.vocab_size, (1, prompt_len), generator=gen, device="cpu").to(device)

    def run_ours():
        return generate(ours, prompt, new_tokens)

    def run_theirs():
        with torch.inference_mode():
            out = theirs.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                  pad_token_id=0)
        return out[:, prompt_len:]

    run_ours(), run_theirs()  # warm-up: allocator, kernels, lazy imports
    times = {"mini_llm": [], "transformers": []}
    for _ in range(repeats):
        for name, fn in (("mini_llm", run_ours), ("transformers", run_theirs)):
            seconds, tokens = time_call(fn, device)
            times[name].append(seconds)
            if name == "mini_llm":
                ours_tokens = tokens
            elif not torch.equal(ours_tokens, tokens):
                raise AssertionError("mini_llm and transformers produced different greedy tokens")
    ms = {name: 1000 * statistics.median(t) / new_tokens for name, t in times.items()}
    spread = {name: (1000 * min(t) / new_tokens, 1000 * max(t) / new_tokens) for name, t in times.items()}
    return {"model": model_path, "params": ours.num_parameters(), "device": device, "new_tokens": new_tokens,
            "prompt_len": prompt_len, "ms_per_token": ms, "ms_per_token_range": spread,
            "speedup": ms["transformers"] / ms["mini_llm"]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help=f"model folder or name (default: {DEFAULT_MODEL}; 'random' for a random tiny config)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    threads = torch.get_num_threads()
    if torch.device(args.device).type == "cpu":
        torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.model == "random":
                path = random_checkpoint(tmp)
            else:
                path = str(resolve_model_path(args.model or DEFAULT_MODEL))
            result = run(path, args.new_tokens, args.prompt_len, args.repeats, args.device)
    finally:
        torch.set_num_threads(threads)
    ms, spread = result["ms_per_token"], result["ms_per_token_range"]
    clock = "wall time after synchronize" if torch.device(args.device).type == "cuda" else "1 thread, thread CPU time"
    print(f"model {result['model']} ({result['params'] / 1e6:.2f} M params), {args.device}, fp32, batch 1, "
          f"prompt {args.prompt_len}, {args.new_tokens} new tokens, median of {args.repeats} ({clock})")
    for name, label in (("mini_llm", "mini_llm generate:    "), ("transformers", "transformers generate:")):
        low, high = spread[name]
        print(f"  {label}  {ms[name]:.2f} ms/token  (range {low:.2f}-{high:.2f})")
    print(f"  ratio: mini_llm is {result['speedup']:.2f}x faster per token (tokens identical)")
    return result


if __name__ == "__main__":
    main()
