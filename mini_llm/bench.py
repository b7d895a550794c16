"""Batch-1 greedy decode speed: mini_llm's `generate` vs transformers' `generate` on one checkpoint.

    python -m mini_llm.bench                      # the embedded target, models/tiny-qwen3
    python -m mini_llm.bench --model models/tiny-qwen3-draft --new-tokens 128 --repeats 5

Both run the same prompt for the same number of new tokens in fp32 on the same device, interleaved
(mini_llm, transformers, mini_llm, ...), and their tokens are asserted identical. Reports the median
ms/token of each and their ratio (ratios from one run on one machine are what to compare).
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


def time_call(fn) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn()
    if out.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, out


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
            seconds, tokens = time_call(fn)
            times[name].append(seconds)
            if name == "mini_llm":
                ours_tokens = tokens
            elif not torch.equal(ours_tokens, tokens):
                raise AssertionError("mini_llm and transformers produced different greedy tokens")
    ms = {name: 1000 * statistics.median(t) / new_tokens for name, t in times.items()}
    return {"model": model_path, "params": ours.num_parameters(), "device": device, "new_tokens": new_tokens,
            "prompt_len": prompt_len, "ms_per_token": ms, "speedup": ms["transformers"] / ms["mini_llm"]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help=f"model folder or name (default: {DEFAULT_MODEL}; 'random' for a random tiny config)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == "random":
            path = random_checkpoint(tmp)
        else:
            path = str(resolve_model_path(args.model or DEFAULT_MODEL))
        result = run(path, args.new_tokens, args.prompt_len, args.repeats, args.device)
    ms = result["ms_per_token"]
    print(f"model {result['model']} ({result['params'] / 1e6:.2f} M params), {args.device}, fp32, batch 1, "
          f"prompt {args.prompt_len}, {args.new_tokens} new tokens, median of {args.repeats}")
    print(f"  mini_llm generate:      {ms['mini_llm']:.2f} ms/token")
    print(f"  transformers generate:  {ms['transformers']:.2f} ms/token")
    print(f"  ratio: mini_llm is {result['speedup']:.2f}x faster per token (tokens identical)")
    return result


if __name__ == "__main__":
    main()
