"""vLLM as a peer of the course's loop: the same model, prompts, methods and thread count, both timed in wall time.

    python -m tree_spec.engine.peer          # prints the table (about 4 minutes)

Methods both can run: plain greedy, prompt lookup (vLLM's rule: `PromptLookupDrafter`, k = 5, n-grams of 1..3),
the small draft model (k = 4) and the EAGLE-3 head (k = 3; vLLM reads it exported by `eagle3_export`), at batch 1
(one request after another) and batch B (all at once: vLLM's scheduler batches them; the course's
`batch_speculative_generate` / `generate_batch`, which has no batched form of a feature-reading head: that row
says so). ms/token = the median over repeats of wall time / new tokens; the spread is the repeats' min..max.
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
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
from ..drafters.batch import as_batch_drafter
from ..drafters.head_io import load_head
from ..drafters.prompt_lookup import PromptLookupDrafter
from . import env
from .eagle3_export import DEFAULT_HEAD, export_eagle3
from .runner import run_vllm


@dataclass(frozen=True)
class Drafts:
    """Where the drafters live: the small draft model, the EAGLE-3 head and its export for vLLM."""

    draft_model: Path
    eagle3_head: Path
    eagle3_checkpoint: Path


@dataclass(frozen=True)
class PeerMethod:
    """A method both engines run: its name, vLLM's speculative config (None: plain), and the course's drafter
    (None: plain) with its k."""

    name: str
    vllm_config: Callable[[Drafts], dict | None]
    drafter: Callable[[Transformer, Drafts], object] | None
    k: int = 0


METHODS = (
    PeerMethod("plain greedy", lambda drafts: None, None),
    PeerMethod("prompt lookup", lambda drafts: {"method": "ngram", "num_speculative_tokens": 5,
                                                "prompt_lookup_max": 3, "prompt_lookup_min": 1},
               lambda target, drafts: PromptLookupDrafter(target.cfg.vocab_size, 1, 3), 5),
    PeerMethod("small model", lambda drafts: {"method": "draft_model", "model": str(drafts.draft_model),
                                              "num_speculative_tokens": 4},
               lambda target, drafts: load_model(drafts.draft_model), 4),
    PeerMethod("EAGLE-3 head", lambda drafts: {"method": "eagle3", "model": str(drafts.eagle3_checkpoint),
                                               "num_speculative_tokens": 3},
               lambda target, drafts: load_head(drafts.eagle3_head, target), 3),
)


@dataclass
class PeerRow:
    """One method at one batch size in one engine: ms/token per repeat, prompts whose output equals plain greedy;
    `missing`: why this engine cannot run it (then no times)."""

    method: str
    batch: int
    engine: str
    ms_per_token: list[float]
    identical: int
    prompts: int
    missing: str = ""

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


def unbatched_reason(drafter: object | None) -> str:
    """Why the course's batched loop cannot run `drafter` ("" if it can)."""
    if drafter is None:
        return ""
    try:
        as_batch_drafter(drafter)
    except TypeError as refusal:
        return str(refusal).split(":")[0]
    return ""


def peer_rows(target_dir: Path, draft_dir: Path, prompts: Sequence[Sequence[int]], new_tokens: int,
              batches: Sequence[int] = (1, 8), repeats: int = 3, eagle3_head: Path = DEFAULT_HEAD) -> list[PeerRow]:
    """Every method at every batch size in both engines, 1 thread each (the course's loop: torch's threads set
    to 1 here; vLLM: its kernels bound to core 0)."""
    torch.set_num_threads(1)
    target = load_model(target_dir)
    plain = course_run(target, None, 0, prompts, new_tokens, 1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        drafts = Drafts(draft_dir.resolve(), Path(eagle3_head).resolve(),
                        export_eagle3(eagle3_head, target_dir, Path(tmp) / "eagle3"))
        for method in METHODS:
            rows += method_rows(method, target, target_dir, drafts, prompts, new_tokens, plain, batches, repeats)
    return rows


def method_rows(method: PeerMethod, target: Transformer, target_dir: Path, drafts: Drafts,
                prompts: Sequence[Sequence[int]], new_tokens: int, plain: list[list[int]], batches: Sequence[int],
                repeats: int) -> list[PeerRow]:
    """One method's rows, course loop then vLLM at each batch size."""
    drafter = method.drafter(target, drafts) if method.drafter else None
    tokens = len(prompts) * new_tokens
    rows = []
    for batch in batches:
        missing = unbatched_reason(drafter) if batch > 1 else ""
        if missing:
            rows.append(PeerRow(method.name, batch, "course loop", [], 0, len(prompts), missing))
        else:
            course_run(target, drafter, method.k, prompts[:batch], new_tokens, batch)  # warm-up
            seconds, outputs = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                outputs = course_run(target, drafter, method.k, prompts, new_tokens, batch)
                seconds.append(time.perf_counter() - start)
            rows.append(PeerRow(method.name, batch, "course loop", [1000 * s / tokens for s in seconds],
                                sum(a == b for a, b in zip(outputs, plain)), len(prompts)))
        run = run_vllm(target_dir, prompts, new_tokens, method.vllm_config(drafts),
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
        vllm_times = f"{theirs.median:.2f} ({min(theirs.ms_per_token):.2f}..{max(theirs.ms_per_token):.2f})"
        if ours.missing:
            lines.append(f"| {method} | {batch} | — ({ours.missing}) | {vllm_times} | — | vLLM (only it runs this) "
                         f"| —, {theirs.identical}/{theirs.prompts} |")
            continue
        if max(theirs.ms_per_token) < min(ours.ms_per_token):
            verdict = "vLLM"
        elif max(ours.ms_per_token) < min(theirs.ms_per_token):
            verdict = "course loop"
        else:
            verdict = "within noise"
        lines.append(f"| {method} | {batch} | {ours.median:.2f} ({min(ours.ms_per_token):.2f}..{max(ours.ms_per_token):.2f}) "
                     f"| {vllm_times} | "
                     f"{ours.median / theirs.median:.2f}x | {verdict} | {ours.identical}/{ours.prompts}, "
                     f"{theirs.identical}/{theirs.prompts} |")
    return "\n".join(lines)


PEER_PROMPTS, PEER_TOKENS, PEER_REPEATS = 8, 64, 3


def peer_result(target_dir: Path, draft_dir: Path, prompts: int = PEER_PROMPTS, new_tokens: int = PEER_TOKENS,
                repeats: int = PEER_REPEATS) -> dict:
    """The peer run as the benchmark stores it: setup, rows (as dicts) and the Markdown table."""
    held_out = held_out_prompts(load_tokenizer(target_dir), prompts)
    rows = peer_rows(Path(target_dir), Path(draft_dir), held_out, new_tokens, (1, prompts), repeats)
    return {"engine": env.engine_name(), "prompts": prompts, "new_tokens": new_tokens, "batch": prompts,
            "repeats": repeats, "rows": [dataclasses.asdict(r) for r in rows], "table": peer_table(rows),
            "command": f"python -m tree_spec.engine.peer --prompts {prompts} --tokens {new_tokens} --repeats {repeats}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=PEER_PROMPTS)
    parser.add_argument("--tokens", type=int, default=PEER_TOKENS)
    parser.add_argument("--repeats", type=int, default=PEER_REPEATS)
    args = parser.parse_args()
    if min(args.prompts, args.tokens, args.repeats) < 1:
        parser.error("--prompts, --tokens and --repeats must be positive")
    models = env.ROOT / "models"
    print(peer_result(models / "tiny-qwen3", models / "tiny-qwen3-draft", args.prompts, args.tokens, args.repeats)["table"])


if __name__ == "__main__":
    main()
