"""No stale reference can land: every shipped reference matches its exercise's files and the checkpoint, and
an edit to a solution or cases file without `record` is caught (shown on copies, never the shipped files)."""
import contextlib
import io
import shutil

import pytest

from practice.judgekit import cli
from practice.judgekit.catalog import discover
from practice.judgekit.settings import PRACTICE, Settings

EXERCISES = discover(PRACTICE / "exercises")


def problems(settings: Settings) -> dict[str, tuple[str, str]]:
    """Exercise name -> (status, detail) for every reference that is missing, altered or stale."""
    from practice.judgekit import references
    from practice.judgekit.grading import reference_problem

    found = {}
    for ex in discover(settings.exercises):
        problem = reference_problem(ex, settings, references.load_meta(settings.references, ex.name))
        if problem:
            found[ex.name] = problem
    return found


def test_every_shipped_reference_is_up_to_date():
    settings = Settings()
    if not settings.model_path().is_dir():
        pytest.skip(f"model {settings.model_path()} missing: the real-model references cannot be verified")
    stale = problems(settings)
    assert not stale, "re-record with `python practice/judge.py record --stale`:\n" + "\n".join(
        f"{name}: {status}: {detail}" for name, (status, detail) in stale.items())


@pytest.fixture
def copy(tmp_path):
    """A copy of exercises 04 and 08 and their references, with settings pointing at it."""
    exercises, refs = tmp_path / "exercises", tmp_path / "references"
    for name in ("04-tree-size", "08-speedup-math"):
        shutil.copytree(PRACTICE / "exercises" / name, exercises / name)
        refs.mkdir(exist_ok=True)
        for suffix in (".pt", ".json"):
            shutil.copy(PRACTICE / "references" / f"{name}{suffix}", refs / f"{name}{suffix}")
    return Settings(exercises=exercises, references=refs, workspace=tmp_path / "ws")


@pytest.mark.parametrize("edit", ["solution.py", "cases.py"])
def test_an_edited_copy_without_record_is_caught(copy, edit):
    assert problems(copy) == {}
    path = copy.exercises / "08-speedup-math" / edit
    path.write_text(path.read_text() + "\n# edited\n")
    assert list(problems(copy)) == ["08-speedup-math"] and problems(copy)["08-speedup-math"][0] == "stale"
    assert [ex.name for ex in cli.out_of_date(copy, discover(copy.exercises))] == ["08-speedup-math"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.cmd_test(copy, discover(copy.exercises)[1], str(path.parent / "solution.py"))
    assert code == 1 and "REFERENCE OUT OF DATE" in out.getvalue(), out.getvalue()


@pytest.mark.parametrize("remove", [".pt", ".json"])
def test_a_missing_reference_is_caught(copy, remove):
    (copy.references / f"04-tree-size{remove}").unlink()
    status = problems(copy)["04-tree-size"][0]
    assert status == ("bad-reference" if remove == ".pt" else "no-reference")
