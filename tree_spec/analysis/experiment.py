"""Chain [1, 1, 1, 1] vs tree [2, 2, 1, 1] with the INT4 fake-quantized self draft, 48 tokens, against reference figures.

python -m tree_spec.analysis.experiment [--model tiny-qwen3] [--tokens 48] [--prompt "def ..."]
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer

from ..drafters.model import QuantizedSelfDrafter
from ..core.output import SpecOutput
from ..core.topology import tree_node_count
from ..decoding.tree import tree_speculative_generate

# Reference figures measured on Qwen3-0.6B (CPU, 48 new tokens, INT4 group fake-quantized self draft, greedy);
# one unpublished run, listed in the README's Reference figures table.
REFERENCE = {"chain": dict(target_calls=23, tau=2.23, nodes=4), "tree": dict(target_calls=21, tau=2.45, nodes=14)}
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


def _thread_time(fn):
    """(fn(), thread CPU seconds it took): with one torch thread this is the work, whatever else loads the cores."""
    start = time.thread_time()
    result = fn()
    return result, time.thread_time() - start


def run_prompts_experiment(
    target: Transformer, prompts: Sequence[Sequence[int]], max_new_tokens: int = 48, bits: int = 4
) -> dict[str, dict]:
    """The experiment over many prompts, timed: plain greedy, chain and tree with the INT-`bits` self draft.

    Runs on one torch thread and times each generation by thread CPU time (restores the thread count).
    -> {"plain" | "chain" | "tree": row}; row lists per prompt: target_calls, tau (tokens per target
    call, counting the target's own token), ms_per_token (thread time / new tokens); plus branching,
    nodes, identical (every prompt equal to plain greedy), alpha and acceptance_ratio (pooled over prompts).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        drafter = QuantizedSelfDrafter(target, bits=bits)
        tree_speculative_generate(target, drafter, prompts[0], 4, branching=SHAPES["tree"])  # warm-up
        rows: dict[str, dict] = {"plain": dict(branching=[], nodes=0, target_calls=[], tau=[], ms_per_token=[])}
        rows |= {name: dict(branching=branching, nodes=tree_node_count(branching), target_calls=[], tau=[],
                            ms_per_token=[], identical=True) for name, branching in SHAPES.items()}
        outs: dict[str, list[SpecOutput]] = {name: [] for name in SHAPES}
        for ids in prompts:  # the methods take turns prompt by prompt, so a slow spell of the machine hits all
            plain, seconds = _thread_time(
                lambda: generate(target, torch.tensor([list(ids)], device=target.device), max_new_tokens)[0].tolist())
            rows["plain"]["target_calls"].append(len(plain))
            rows["plain"]["tau"].append(1.0)
            rows["plain"]["ms_per_token"].append(1e3 * seconds / len(plain))
            for name, branching in SHAPES.items():
                out, seconds = _thread_time(
                    lambda: tree_speculative_generate(target, drafter, ids, max_new_tokens, branching=branching))
                row = rows[name]
                row["target_calls"].append(out.target_calls)
                row["tau"].append(out.tau)
                row["ms_per_token"].append(1e3 * seconds / len(out.tokens))
                row["identical"] &= out.tokens == plain
                outs[name].append(out)
        for name, runs in outs.items():  # pooled over prompts: sums first, the ratio last
            total = SpecOutput.pooled(runs)
            rows[name]["alpha"], rows[name]["acceptance_ratio"] = total.alpha, total.acceptance_ratio
    finally:
        torch.set_num_threads(threads)
    return rows


def mean_spread(values: Sequence[float]) -> str:
    """'mean ± standard deviation' of a list of numbers (spread 0 for a single value)."""
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {spread:.2f}"


def print_prompts_experiment(rows: dict[str, dict]) -> None:
    """One line per method: target passes, tokens per pass and ms per token as mean ± spread over prompts,
    next to the reference figures (`REFERENCE`)."""
    n = len(rows["plain"]["tau"])
    print(f"{'':6s} {'branching':13s} {'nodes':>5s} {'target passes':>14s} {'tokens/pass':>12s} {'ms/token (1 thread)':>20s}"
          f" {'identical':>9s} | Qwen3-0.6B: {'passes':>6s} {'tokens/pass':>11s}")
    for name, row in rows.items():
        reference = REFERENCE.get(name)
        published = f"{reference['target_calls']:15d} {reference['tau']:11.2f}" if reference else ""
        print(f"{name:6s} {str(row['branching'] or '-'):13s} {row['nodes']:5d} {mean_spread(row['target_calls']):>14s} "
              f"{mean_spread(row['tau']):>12s} {mean_spread(row['ms_per_token']):>20s} {str(row.get('identical', '-')):>9s}"
              f" | {published}")
    print(f"mean ± standard deviation over {n} prompts; target passes count the prefill; tokens/pass (τ) counts the "
          "target's own token (plain = 1.00)")


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
          f"{'alpha':>6s} {'ratio':>6s} {'identical to greedy':>19s} | Qwen3-0.6B: {'calls':>5s} {'tokens/call':>11s}")
    for row in run_experiment(target, prompt_ids, args.tokens, args.bits):
        reference = REFERENCE[row["name"]]
        print(f"{row['name']:6s} {str(row['branching']):14s} {row['nodes']:10d} {row['target_calls']:12d} "
              f"{row['tau']:11.2f} {row['alpha']:6.2f} {row['acceptance_ratio']:6.2f} {str(row['identical']):>19s}"
              f" | {reference['target_calls']:17d} {reference['tau']:11.2f}")
    print("tokens/call = tau, counting the token the target adds each pass (plain decoding = 1.00); "
          "alpha = per-position acceptance rate (depth d accepted given depths < d were); "
          "ratio = accepted / proposed draft tokens; Qwen3-0.6B: the same experiment, 48 new tokens, on another "
          "prompt (REFERENCE)")


if __name__ == "__main__":
    main()
