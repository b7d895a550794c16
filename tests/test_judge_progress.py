"""Progress that does not go stale: grading another file keeps the workspace file's pass beside its own, and `list`
shows each exercise's state against its current workspace file (its bar counts only the files that pass as they
are). Grading is stubbed: these tests are about what the judge records, not about a verdict."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from practice.judgekit import cli
from practice.judgekit.catalog import discover, resolve
from practice.judgekit.progress import Progress
from practice.judgekit.settings import PRACTICE, Settings

EXERCISES = discover(PRACTICE / "exercises")
MASK = resolve(EXERCISES, "1")


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr(cli, "grade_file", lambda ex, path, settings: {"status": "pass", "cases": [], "total": 0})
    return dataclasses.replace(Settings(), workspace=tmp_path / "workspace")


def test_grading_another_file_keeps_the_workspace_files_pass(settings: Settings, tmp_path: Path, capsys) -> None:
    own = settings.workspace / f"{MASK.name}.py"
    own.parent.mkdir(parents=True)
    own.write_text("# my mask\n")
    other = tmp_path / "experiment.py"
    other.write_text("# another mask\n")
    assert cli.cmd_test(settings, MASK, None) == 0
    assert cli.cmd_test(settings, MASK, str(other)) == 0
    out = capsys.readouterr().out
    assert "This pass is kept for" in out and "keeps its pass" in out
    progress = Progress.load(settings.workspace)
    assert progress.still_passes(MASK.name, own) and progress.still_passes(MASK.name, other)
    cli.cmd_list(settings, EXERCISES)
    listing = capsys.readouterr().out
    assert f"{MASK.slug:<22} solved" in listing and f"1/{len(EXERCISES)} solved" in listing


def test_list_shows_each_exercise_against_its_current_file(settings: Settings, tmp_path: Path, capsys) -> None:
    own = settings.workspace / f"{MASK.name}.py"
    own.parent.mkdir(parents=True)
    other = tmp_path / "experiment.py"
    other.write_text("# passed elsewhere\n")
    own.write_text("# not yet passed\n")
    assert cli.cmd_test(settings, MASK, str(other)) == 0
    assert "has not passed as it is now" in capsys.readouterr().out
    cli.cmd_list(settings, EXERCISES)
    listing = capsys.readouterr().out
    assert f"{MASK.slug:<22} changed" in listing and f"0/{len(EXERCISES)} solved" in listing, listing
    assert "capstone" in listing and "locked" in listing
    own.write_text(other.read_text())  # the same content as a file that passed: it counts
    cli.cmd_list(settings, EXERCISES)
    assert f"1/{len(EXERCISES)} solved" in capsys.readouterr().out


def test_a_state_file_with_one_digest_per_exercise_still_loads(settings: Settings) -> None:
    settings.workspace.mkdir(parents=True)
    own = settings.workspace / f"{MASK.name}.py"
    own.write_text("x = 1\n")
    from practice.judgekit.progress import STATE_FILE, file_digest

    (settings.workspace / STATE_FILE).write_text(
        f'{{"passed": ["{MASK.name}"], "hints": {{}}, "digests": {{"{MASK.name}": "{file_digest(own)}"}}}}')
    assert Progress.load(settings.workspace).state(MASK.name, own) == "solved"
