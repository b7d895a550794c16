"""Where the judge reads and writes, and how long learner code may run; from options or environment."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PRACTICE = Path(__file__).resolve().parent.parent
REPO = PRACTICE.parent
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Settings:
    """exercises/references/workspace folders, the model real-model exercises load, the per-file timeout.

    Environment overrides (options win): SPEC_JUDGE_WORKSPACE, SPEC_JUDGE_REFERENCES, SPEC_JUDGE_MODEL
    (a models/ name or a folder), SPEC_JUDGE_TIMEOUT (seconds), SPEC_JUDGE_DEVICE (grading device).
    """

    exercises: Path = PRACTICE / "exercises"
    references: Path = PRACTICE / "references"
    workspace: Path = PRACTICE / "workspace"
    model: str = "tiny-qwen3"
    timeout_s: float = DEFAULT_TIMEOUT_S
    device: str = "cpu"

    @classmethod
    def from_env(
        cls,
        workspace: str | None = None,
        references: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> "Settings":
        env = os.environ
        return cls(
            references=Path(references or env.get("SPEC_JUDGE_REFERENCES") or cls.references),
            workspace=Path(workspace or env.get("SPEC_JUDGE_WORKSPACE") or cls.workspace),
            model=model or env.get("SPEC_JUDGE_MODEL") or cls.model,
            timeout_s=float(timeout_s or env.get("SPEC_JUDGE_TIMEOUT") or DEFAULT_TIMEOUT_S),
            device=env.get("SPEC_JUDGE_DEVICE") or cls.device,
        )

    def model_path(self) -> Path:
        """The model folder: `model` as a path if it is a folder, else models/<model>."""
        path = Path(self.model)
        return path if path.is_dir() else REPO / "models" / self.model
