"""The learner's progress in the workspace: which exercises passed, how many hints were shown."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

STATE_FILE = ".judge-state.json"


@dataclass
class Progress:
    passed: set[str] = field(default_factory=set)
    hints: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, workspace: Path) -> "Progress":
        path = workspace / STATE_FILE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls(set(data.get("passed", [])), dict(data.get("hints", {})))

    def save(self, workspace: Path) -> None:
        workspace.mkdir(parents=True, exist_ok=True)
        data = {"passed": sorted(self.passed), "hints": self.hints}
        (workspace / STATE_FILE).write_text(json.dumps(data, indent=2) + "\n")
