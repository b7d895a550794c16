"""`python -m tree_spec.tools.bench --batch 1,4,16`: plain `generate_batch` against batched chain speculation for
every batched drafter, written as BENCHMARK_BATCH.md."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from mini_llm import Transformer, load_model, load_tokenizer

from ..analysis.batch_sweep import batch_sweeps, batch_table, plain_scaling
from ..analysis.clocks import clock_name, hardware_name
from ..analysis.prompts import held_out_prompts
from ..drafters.base import Drafter
from ..drafters.model import QuantizedSelfDrafter
from ..drafters.ngram import NGramDrafter


def batch_benchmark(
    target_name: str, draft_name: str, batches: Sequence[int], n_prompts: int, new_tokens: int, k: int = 4,
    out_dir: str | None = None, device: torch.device | str = "cpu",
) -> dict:
    """`batch_sweep` for every batched drafter (n-gram, the separate small model unless draft_name is 'none', the
    INT4 quantized self) on held-out prompts, every model on `device`; prints the table and, with out_dir, writes
    BENCHMARK_BATCH.md there. Returns {drafter: [BatchPoint as dict]}."""
    target = load_model(target_name, device=device)
    prompts = held_out_prompts(load_tokenizer(target_name), n=n_prompts)
    drafters: dict[str, Drafter | Transformer] = {"n-gram": NGramDrafter(target.cfg.vocab_size, device=target.device)}
    if draft_name != "none":
        drafters[f"small model ({draft_name})"] = load_model(draft_name, device=device)
    drafters["INT4 quantized self"] = QuantizedSelfDrafter(target)
    runs = batch_sweeps(target, drafters, prompts, batches, new_tokens, k=k)
    clock = clock_name(target.device)
    text = (f"# Batched decoding: plain vs chain speculation (k = {k}), {target_name}\n\n"
            f"{n_prompts} held-out prompts at every batch size B (in batches of B; cycled to fill a batch larger than "
            f"{n_prompts}), {new_tokens} new tokens per row, greedy, "
            f"{hardware_name(target.device)}, {torch.get_num_threads()} torch thread(s), {clock}; tokens/s = "
            f"tokens generated / time of the calls, prefill included. Command: `python -m tree_spec.tools.bench --batch "
            f"{','.join(map(str, batches))} --prompts {n_prompts} --new-tokens {new_tokens} --device {device}`."
            f"\n\n{batch_table(runs)}\n\nPlain `generate_batch` tokens/s over its tokens/s at B = {batches[0]} (one "
            f"plain run per B, shared by the drafters): "
            + ", ".join(f"B = {b}: {r:.2f}×" for b, r in plain_scaling(next(iter(runs.values()))).items()) + "\n")
    print(text)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "BENCHMARK_BATCH.md").write_text(text)
    return {name: [vars(p) | dict(speedup=p.speedup, plain_time=p.plain_time.to_dict(),
                                  spec_time=p.spec_time.to_dict()) for p in points] for name, points in runs.items()}
