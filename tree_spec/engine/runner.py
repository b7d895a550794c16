"""Run the course's models in vLLM from the course's environment, and read vLLM's counters as the course's rates.

vLLM counts, per request and over all its speculative steps: `num_drafts` (steps that proposed at least one
token), `num_draft_tokens`, `num_accepted_tokens` and `num_accepted_tokens_per_pos[i]` (steps whose draft i was
accepted, so every draft before it was too). The course's `SpecOutput` keeps the same counts per depth.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import env
from .server import engine_environ

WORKER = Path(__file__).with_name("worker.py")


@dataclass
class VllmRun:
    """One vLLM generation: new token ids per prompt, wall seconds of each repeat of it, vLLM's `spec_decode_*`
    counters over the first (empty without speculation)."""

    tokens: list[list[int]]
    seconds: list[float]
    counters: dict

    @property
    def drafts(self) -> int:
        """Speculative steps that proposed at least one token."""
        return int(self.counters.get("num_drafts", 0))

    @property
    def accepted_per_position(self) -> list[int]:
        """[k]: steps whose draft at position i (0-based) was accepted."""
        return [int(x) for x in self.counters.get("num_accepted_tokens_per_pos", [])]

    @property
    def acceptance_per_position(self) -> list[float]:
        """Unconditional, per position: accepted at i / steps that drafted (as `SpecOutput.acceptance_per_position`
        when every step drafts k)."""
        return [a / self.drafts for a in self.accepted_per_position] if self.drafts else []

    @property
    def acceptance_ratio(self) -> float:
        """Accepted draft tokens / proposed draft tokens."""
        proposed = self.counters.get("num_draft_tokens", 0)
        return self.counters.get("num_accepted_tokens", 0) / proposed if proposed else 0.0


def run_vllm(
    model: str | Path, prompts: Sequence[Sequence[int]], max_tokens: int, speculative_config: dict | None = None,
    one_at_a_time: bool = False, threads: int = 1, max_model_len: int = 2048, repeats: int = 1,
    max_num_seqs: int = 256, timeout: float = 600,
) -> VllmRun:
    """Greedy generation of `max_tokens` new tokens (no EOS stop) after each prompt in vLLM's CPU build.

    speculative_config: vLLM's `--speculative-config`, e.g. {"method": "ngram", "num_speculative_tokens": 5,
    "prompt_lookup_max": 3, "prompt_lookup_min": 1}; paths inside it are taken as given. one_at_a_time: one
    request after another (batch 1); else all at once (vLLM batches them). threads: CPU cores vLLM's kernels use
    (0 .. threads - 1). repeats: timed generations in the same engine, after a warm-up request. max_num_seqs: the most requests
    vLLM's scheduler batches in one step. RuntimeError with
    vLLM's last lines if it fails.
    """
    python = env.ensure()
    job = {"model": str(Path(model).resolve()), "prompts": [[int(t) for t in p] for p in prompts],
           "max_tokens": int(max_tokens), "speculative_config": speculative_config, "one_at_a_time": one_at_a_time,
           "max_model_len": max_model_len, "repeats": repeats, "max_num_seqs": max_num_seqs}
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out_path = Path(tmp, "job.json"), Path(tmp, "out.json")
        job_path.write_text(json.dumps(job))
        done = subprocess.run([str(python), str(WORKER), str(job_path), str(out_path)], capture_output=True,
                              text=True, env=engine_environ(threads), timeout=timeout, cwd=tmp)
        if done.returncode or not out_path.exists():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
            raise RuntimeError(f"vLLM failed (exit {done.returncode}):\n{tail}")
        result = json.loads(out_path.read_text())
    return VllmRun(result["tokens"], result["seconds"], result["counters"])
