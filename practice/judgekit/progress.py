"""The learner's progress in the workspace: which exercises passed (and the sha256 of the file that passed), how
many hints were shown."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

STATE_FILE = ".judge-state.json"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Progress:
    passed: set[str] = field(default_factory=set)
    hints: dict[str, int] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # exercise -> sha256 of the file that passed

    def record_pass(self, name: str, path: Path) -> None:
        self.passed.add(name)
        self.digests[name] = file_digest(path)

    def still_passes(self, name: str, path: Path) -> bool:
        """True when `name` passed and `path` is the file that passed (unchanged since; a state file written before
        digests were kept trusts any file)."""
        if name not in self.passed or not path.exists():
            return False
        return self.digests.get(name) in (None, file_digest(path))

    @classmethod
    def load(cls, workspace: Path) -> "Progress":
        path = workspace / STATE_FILE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls(set(data.get("passed", [])), dict(data.get("hints", {})), dict(data.get("digests", {})))

    def save(self, workspace: Path) -> None:
        workspace.mkdir(parents=True, exist_ok=True)
        data = {"passed": sorted(self.passed), "hints": self.hints, "digests": self.digests}
        (workspace / STATE_FILE).write_text(json.dumps(data, indent=2) + "\n")
