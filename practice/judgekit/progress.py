"""The learner's progress in the workspace: which exercises passed, the sha256 of every file that passed each of them
(the workspace file and any other file `test N file` graded: grading another file never replaces a recorded pass),
and how many hints were shown."""
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
    digests: dict[str, list[str]] = field(default_factory=dict)  # exercise -> sha256 of every file that passed it

    def record_pass(self, name: str, path: Path) -> None:
        """Add `path`'s content to the files that passed `name`; the passes recorded before stay."""
        self.passed.add(name)
        digest = file_digest(path)
        if digest not in self.digests.setdefault(name, []):
            self.digests[name].append(digest)

    def still_passes(self, name: str, path: Path) -> bool:
        """True when `path` holds a file that passed `name` (unchanged since; a state file written before digests
        were kept trusts any file)."""
        if name not in self.passed or not path.exists():
            return False
        return name not in self.digests or file_digest(path) in self.digests[name]

    def state(self, name: str, path: Path) -> str:
        """The exercise's state against its current file `path`: 'solved' (this file passed), 'changed' (another
        version passed, not this one), 'elsewhere' (no such file; another file passed), 'started' (a file, no pass)
        or ''."""
        if self.still_passes(name, path):
            return "solved"
        if name in self.passed:
            return "changed" if path.exists() else "elsewhere"
        return "started" if path.exists() else ""

    @classmethod
    def load(cls, workspace: Path) -> "Progress":
        path = workspace / STATE_FILE
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        digests = {name: [d] if isinstance(d, str) else list(d) for name, d in data.get("digests", {}).items()}
        return cls(set(data.get("passed", [])), dict(data.get("hints", {})), digests)

    def save(self, workspace: Path) -> None:
        workspace.mkdir(parents=True, exist_ok=True)
        data = {"passed": sorted(self.passed), "hints": self.hints, "digests": self.digests}
        (workspace / STATE_FILE).write_text(json.dumps(data, indent=2) + "\n")
