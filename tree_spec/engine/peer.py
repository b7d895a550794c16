"""vLLM as a peer of the course's loop: the same model, prompts, methods and thread count, both timed in wall time.

    python -m tree_spec.engine.peer          # prints the table (about 4 minutes)

Methods both can run: plain greedy, prompt lookup (vLLM's rule: `PromptLookupDrafter`, k = 5, n-grams of 1..3) and
the small draft model (k = 4), at batch 1 (one request after another) and batch B (all at once: vLLM's scheduler
batches them; the course's `batch_speculative_generate` / `generate_batch`). ms/token = the median over repeats of
wall time / new tokens; the spread is the repeats' min..max.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.batch import generate_batch

from ..analysis.prompts import held_out_prompts
from ..decoding.batch import batch_speculative_generate
from ..decoding.chain import speculative_generate
from ..drafters.prompt_lookup import PromptLookupDrafter
from . import env
from .runner import run_vllm


@dataclass(frozen=True)
class PeerMethod:
    """A method both engines run: its name, vLLM's speculative config (None: plain), and the course's drafter
    (None: plain) with its k."""

    name: str
    vllm_config: Callable[[Path], dict | None]
    drafter: Callable[[Transformer, Transformer], object] | None
    k: int = 0


METHODS = (
    PeerMethod("plain greedy", lambda draft_dir: None, None),
    PeerMethod("prompt lookup", lambda draft_dir: {"method": "ngram", "num_speculative_tokens": 5,
                                                   "prompt_lookup_max": 3, "prompt_lookup_min": 1},
               lambda target, draft: PromptLookupDrafter(target.cfg.vocab_size, 1, 3), 5),
    PeerMethod("small model", lambda draft_dir: {"method": "draft_model", "model": str(draft_dir),
                                                 "num_speculative_tokens": 4}, lambda target, draft: draft, 4),
)


@dataclass
class PeerRow:
    """One method at one batch size in one engine: ms/token per repeat, prompts whose output equals plain greedy."""

    method: str
    batch: int
    engine: str
    ms_per_token: list[float]
    identical: int
    prompts: int

    @property
    def median(self) -> float:
        return statistics.median(self.ms_per_token)


def course_run(target: Transformer, drafter: object | None, k: int, prompts: Sequence[Sequence[int]],
               new_tokens: int, batch: int) -> list[list[int]]:
    """The course's loop on every prompt, `batch` at a time -> new tokens per prompt."""
    out: list[list[int]] = []
    for i in range(0, len(prompts), batch):
        group = prompts[i:i + batch]
        if drafter is None and batch == 1:
            out += [generate(target, torch.tensor([group[0]]), new_tokens)[0].tolist()]
        elif drafter is None:
            out += generate_batch(target, group, new_tokens)
        elif batch == 1:
            out += [speculative_generate(target, drafter, group[0], new_tokens, k=k).tokens]
        else:
            out += [o.tokens for o in batch_speculative_generate(target, drafter, group, new_tokens, k=k)]
    return out


def peer_rows(target_dir: Path, draft_dir: Path, prompts: Sequence[Sequence[int]], new_tokens: int,
              batches: Sequence[int] = (1, 8), repeats: int = 3) -> list[PeerRow]:
    """Every method at every batch size in both engines, 1 thread each (the course's loop: torch's threads set
    to 1 here; vLLM: its kernels bound to core 0)."""
    torch.set_num_threads(1)
    target, draft = load_model(target_dir), load_model(draft_dir)
    plain = course_run(target, None, 0, prompts, new_tokens, 1)
    tokens = len(prompts) * new_tokens
    rows = []
    for method in METHODS:
        drafter = method.drafter(target, draft) if method.drafter else None
        for batch in batches:
            course_run(target, drafter, method.k, prompts[:batch], new_tokens, batch)  # warm-up
            seconds, outputs = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                outputs = course_run(target, drafter, method.k, prompts, new_tokens, batch)
                seconds.append(time.perf_counter() - start)
            rows.append(PeerRow(method.name, batch, "course loop", [1000 * s / tokens for s in seconds],
                                sum(a == b for a, b in zip(outputs, plain)), len(prompts)))
            run = run_vllm(target_dir, prompts, new_tokens, method.vllm_config(draft_dir.resolve()),
                           one_at_a_time=batch == 1, threads=1, repeats=repeats, max_num_seqs=batch)
            rows.append(PeerRow(method.name, batch, "vLLM", [1000 * s / tokens for s in run.seconds],
                                sum(a == b for a, b in zip(run.tokens, plain)), len(prompts)))
    return rows


def peer_table(rows: Sequence[PeerRow]) -> str:
    """Markdown: one line per method and batch size, the two engines side by side, and which is faster (only when
    the repeats' ranges do not overlap; else "within noise")."""
    lines = ["| method | batch | course loop ms/token (min..max) | vLLM ms/token (min..max) | vLLM / course speed | "
             "faster | identical (course, vLLM) |", "|---|---|---|---|---|---|---|"]
    pairs = {(r.method, r.batch, r.engine): r for r in rows}
    for method, batch in dict.fromkeys((r.method, r.batch) for r in rows):
        ours, theirs = pairs[method, batch, "course loop"], pairs[method, batch, "vLLM"]
        if max(theirs.ms_per_token) < min(ours.ms_per_token):
            verdict = "vLLM"
        elif max(ours.ms_per_token) < min(theirs.ms_per_token):
            verdict = "course loop"
        else:
            verdict = "within noise"
        lines.append(f"| {method} | {batch} | {ours.median:.2f} ({min(ours.ms_per_token):.2f}..{max(ours.ms_per_token):.2f}) "
                     f"| {theirs.median:.2f} ({min(theirs.ms_per_token):.2f}..{max(theirs.ms_per_token):.2f}) | "
                     f"{ours.median / theirs.median:.2f}x | {verdict} | {ours.identical}/{ours.prompts}, "
                     f"{theirs.identical}/{theirs.prompts} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if min(args.prompts, args.tokens, args.repeats) < 1:
        parser.error("--prompts, --tokens and --repeats must be positive")
    target_dir, draft_dir = env.ROOT / "models" / "tiny-qwen3", env.ROOT / "models" / "tiny-qwen3-draft"
    prompts = held_out_prompts(load_tokenizer(target_dir), args.prompts)
    print(peer_table(peer_rows(target_dir, draft_dir, prompts, args.tokens, (1, args.prompts), args.repeats)))


if __name__ == "__main__":
    main()
