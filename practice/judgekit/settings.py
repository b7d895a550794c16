"""Where the judge reads and writes, and how long learner code may run; from options or environment."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PRACTICE = Path(__file__).resolve().parent.parent
REPO = PRACTICE.parent
MIN_TIMEOUT_S = 10.0  # the time limit is max(this, TIMEOUT_FACTOR x the reference solution's time)
TIMEOUT_FACTOR = 10.0
DEFAULT_MEMORY_MB = 4096  # address space a worker may add after loading torch and the model


@dataclass(frozen=True)
class Settings:
    """exercises/references/workspace folders, the model real-model exercises load, the per-file timeout.

    Environment overrides (options win): SPEC_JUDGE_WORKSPACE, SPEC_JUDGE_REFERENCES, SPEC_JUDGE_MODEL
    (a models/ name or a folder), SPEC_JUDGE_TIMEOUT (seconds), SPEC_JUDGE_DEVICE (grading device),
    SPEC_JUDGE_FORK=0 (a new interpreter per graded file instead of a fork of one that imported torch).
    """

    exercises: Path = PRACTICE / "exercises"
    references: Path = PRACTICE / "references"
    workspace: Path = PRACTICE / "workspace"
    model: str = "tiny-qwen3"
    timeout_s: float | None = None  # None: max(MIN_TIMEOUT_S, TIMEOUT_FACTOR x the reference's time)
    memory_mb: int = DEFAULT_MEMORY_MB
    device: str = "cpu"
    fork: bool = True

    @classmethod
    def from_env(
        cls,
        workspace: str | None = None,
        references: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
    ) -> "Settings":
        env = os.environ
        timeout = timeout_s or env.get("SPEC_JUDGE_TIMEOUT")
        return cls(
            references=Path(references or env.get("SPEC_JUDGE_REFERENCES") or cls.references),
            workspace=Path(workspace or env.get("SPEC_JUDGE_WORKSPACE") or cls.workspace),
            model=model or env.get("SPEC_JUDGE_MODEL") or cls.model,
            timeout_s=float(timeout) if timeout else None,
            memory_mb=int(memory_mb or env.get("SPEC_JUDGE_MEMORY_MB") or DEFAULT_MEMORY_MB),
            device=env.get("SPEC_JUDGE_DEVICE") or cls.device,
            fork=env.get("SPEC_JUDGE_FORK", "1") != "0",
        )

    def model_path(self) -> Path:
        """The model folder: `model` as a path if it is a folder, else models/<model>."""
        path = Path(self.model)
        return path if path.is_dir() else REPO / "models" / self.model

    def time_limit(self, reference_seconds: float | None) -> float:
        """Seconds a file may run after the worker is ready: the option, else scaled to the reference's time."""
        if self.timeout_s is not None:
            return self.timeout_s
        return max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * (reference_seconds or 0.0))
