"""The capstone's place in `judge.py list` (no torch import): locked until the verify pass's pieces pass."""
from __future__ import annotations

from .progress import Progress
from .settings import Settings

# the greedy verify pass: tree mask, positions, acceptance walk, compaction (capstone_pieces.VERIFY_KEYS)
REQUIRED = ("01-tree-mask", "02-depths-positions", "03-accept-path", "09-compact-path")
PASSED = "capstone"  # the name a passing capstone run adds to the workspace's progress


def missing(settings: Settings) -> list[str]:
    """The required exercises not passed yet (or whose workspace file is gone or changed since it passed)."""
    progress = Progress.load(settings.workspace)
    return [name for name in REQUIRED if not progress.still_passes(name, settings.workspace / f"{name}.py")]


def list_line(settings: Settings, number: int) -> str:
    """The capstone's line in `judge.py list`: passed, ready, or locked with what to pass first."""
    todo = missing(settings)
    status = "locked" if todo else "passed" if PASSED in Progress.load(settings.workspace).passed else "ready"
    need = f" (pass {', '.join(name.split('-')[0] for name in todo)} first)" if todo else ""
    return f"  {number:2d}  {'capstone':<22} {status:<8} Your pieces as one speculative decoder{need}"
