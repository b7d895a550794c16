"""The chapter's experiment: chain [1, 1, 1, 1] vs tree [2, 2, 1, 1], INT4 fake-quantized self draft, 48 tokens.

python -m tree_spec.experiment [--model tiny-qwen3] [--tokens 48] [--prompt "def ..."]
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer

from .drafters import QuantizedSelfDrafter
from .speedup import tree_node_count
from .tree import tree_speculative_generate

DEFAULT_PROMPT = 'def read_config(path):\n    """Read a JSON configuration file and return it as a dict."""\n'
SHAPES = {"chain": [1, 1, 1, 1], "tree": [2, 2, 1, 1]}


def run_experiment(
    target: Transformer, prompt_ids: Sequence[int], max_new_tokens: int = 48, bits: int = 4
) -> list[dict]:
    """Greedy chain vs tree decoding with the INT-`bits` self draft; one row per shape.

    Row: name, branching, nodes (draft tokens per step), target_calls, tau (tokens per target call,
    counting the target's own token), alpha (per-position rate), acceptance_ratio
    (accepted / proposed), identical (to plain greedy), seconds.
    """
    drafter = QuantizedSelfDrafter(target, bits=bits)
    expected = generate(target, torch.tensor([list(prompt_ids)], device=target.device), max_new_tokens)[0].tolist()
    rows = []
    for name, branching in SHAPES.items():
        out = tree_speculative_generate(target, drafter, prompt_ids, max_new_tokens, branching=branching)
        rows.append(dict(
            name=name, branching=branching, nodes=tree_node_count(branching), target_calls=out.target_calls,
            tau=out.tau, alpha=out.alpha, acceptance_ratio=out.acceptance_ratio, identical=out.tokens == expected,
            seconds=out.seconds,
        ))
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny-qwen3", help="a folder under models/ or a path (default: tiny-qwen3)")
    p.add_argument("--tokens", type=int, default=48, help="new tokens (default: 48)")
    p.add_argument("--bits", type=int, default=4, help="fake-quantization bits of the self draft (default: 4)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    args = p.parse_args(argv)
    target = load_model(args.model)
    prompt_ids = load_tokenizer(args.model).encode(args.prompt)
    print(f"target {args.model} ({target.num_parameters() / 1e6:.1f} M parameters), draft: INT{args.bits} "
          f"group fake-quantized self, {args.tokens} new tokens, greedy, prompt of {len(prompt_ids)} tokens")
    print(f"{'shape':6s} {'branching':14s} {'nodes/step':>10s} {'target calls':>12s} {'tokens/call':>11s} "
          f"{'alpha':>6s} {'ratio':>6s} {'identical to greedy':>19s}")
    for row in run_experiment(target, prompt_ids, args.tokens, args.bits):
        print(f"{row['name']:6s} {str(row['branching']):14s} {row['nodes']:10d} {row['target_calls']:12d} "
              f"{row['tau']:11.2f} {row['alpha']:6.2f} {row['acceptance_ratio']:6.2f} {str(row['identical']):>19s}")
    print("tokens/call = tau, counting the token the target adds each pass (plain decoding = 1.00); "
          "alpha = per-position acceptance rate (depth d accepted given depths < d were); "
          "ratio = accepted / proposed draft tokens")


if __name__ == "__main__":
    main()
