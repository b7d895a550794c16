"""The exercises on disk: `exercises/NN-slug/` with README.md, starter.py, solution.py, cases.py, wrong/*.py."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Exercise:
    number: int
    slug: str
    folder: Path

    @property
    def name(self) -> str:
        """'01-tree-mask': the folder name, also the workspace file's stem and the reference's stem."""
        return self.folder.name

    @property
    def title(self) -> str:
        """The README's heading without its number: 'Tree attention mask'."""
        first = self.readme().splitlines()[0] if self.readme() else self.name
        return re.sub(r"^\d+\s*·\s*", "", first.lstrip("# ").strip())

    @property
    def needs_model(self) -> bool:
        """Whether grading loads the real model (cases.py sets NEEDS_MODEL = True)."""
        return re.search(r"^NEEDS_MODEL\s*=\s*True", (self.folder / "cases.py").read_text(), re.M) is not None

    def readme(self) -> str:
        path = self.folder / "README.md"
        return path.read_text() if path.exists() else ""

    def task(self) -> str:
        """The README without its Hints section."""
        return self.readme().split("\n## Hints", 1)[0].rstrip() + "\n"

    def hints(self) -> list[str]:
        """The numbered items of the README's '## Hints' section, in order."""
        section = self.readme().split("\n## Hints", 1)
        if len(section) < 2:
            return []
        body = section[1].split("\n## ", 1)[0]
        items = re.split(r"^\d+\.\s+", body, flags=re.M)[1:]
        return [" ".join(item.split()) for item in items]

    def wrong_files(self) -> list[Path]:
        return sorted((self.folder / "wrong").glob("*.py"))


def discover(exercises_dir: Path) -> list[Exercise]:
    """Every `NN-slug` folder, in number order."""
    found = []
    for folder in sorted(exercises_dir.iterdir()):
        match = re.fullmatch(r"(\d+)-([a-z0-9-]+)", folder.name)
        if folder.is_dir() and match and (folder / "cases.py").exists():
            found.append(Exercise(int(match[1]), match[2], folder))
    return found


def resolve(exercises: list[Exercise], key: str) -> Exercise:
    """An exercise by number ('3', '03'), slug ('accept-path') or folder name ('03-accept-path')."""
    for ex in exercises:
        if key in (ex.slug, ex.name) or (key.isdigit() and int(key) == ex.number):
            return ex
    names = ", ".join(f"{ex.number} ({ex.slug})" for ex in exercises)
    raise LookupError(f"no exercise {key!r}; choose one of: {names}")
