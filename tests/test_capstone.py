"""The capstone (practice/judgekit/capstone*.py) in its fast mode: the solutions pass every check; a wrong file from
an exercise's wrong/ folder fails and is named with its exercise; a broken tree sampler fails the sampled check; a
piece that never returns is stopped and named. The models are loaded once for the module."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from practice.judgekit import capstone_pieces
from practice.judgekit.capstone import Capstone, Models, Plan, run
from practice.judgekit.capstone_pieces import PieceError, choose
from practice.judgekit.settings import PRACTICE, Settings
from tree_spec.analysis.clocks import one_thread
from .capstone_fixtures import models, settings  # noqa: F401 (fixtures)

EXERCISES = PRACTICE / "exercises"
SHORT = Plan(prompts=1, new_tokens=8)  # the greedy rows of the wrong-file tests


def test_solutions_pass_every_check(settings: Settings, models: Models) -> None:
    lines: list[str] = []
    result = run(settings, choose(settings, True, {}), Plan.fast(), lines.append, models)
    assert result.ok and result.passed, "\n".join(lines)
    assert all(r.identical == r.pkg_identical == Plan.fast().prompts for r in result.rows)
    assert result.sampling_p is not None and result.sampling_p > 0.001
    assert result.figure is not None and result.figure.exists()
    assert any(line.strip().startswith("PASS") for line in lines)


@pytest.mark.parametrize("wrong, where", [
    ("01-tree-mask/wrong/causal.py", "prompt 0, new token"),
    ("03-accept-path/wrong/own_row.py", "prompt 0, new token"),
    ("12-ngram-proposer/wrong/oldest_match.py", "prompt 0, new token"),
    ("03-accept-path/wrong/four_steps.py", "on a chain of 12 drafts"),  # the acceptance walk's constructed trees
    ("03-accept-path/wrong/last_duplicate.py", "on 8 levels of 3 siblings"),
    ("03-accept-path/wrong/mutates_logits.py", "changed target_logits in place"),
])
def test_a_wrong_file_is_named_with_its_exercise(settings: Settings, models: Models, wrong: str, where: str) -> None:
    key = wrong[:2]
    cap = Capstone(settings, choose(settings, True, {key: EXERCISES / wrong}), SHORT, lambda _: None, models)
    with one_thread():
        if where.startswith("prompt"):
            cap.greedy_rows()
        cap.rule_walks()
    text = "\n".join(f.text() for f in cap.result.failures)
    assert cap.result.failures and all(f.keys == [key] for f in cap.result.failures), text
    label = capstone_pieces.BY_KEY[key].label
    assert label in text and f"python practice/judge.py test {key}" in text and where in text, text
    if where.startswith("on "):  # the acceptance walk: a rule broken, whatever the outputs
        assert not cap.result.rules_followed
    if key == "01":  # a wrong mask changes the output: the first diverging token is shown
        assert "expected" in text and "got" in text and "(id " in text


def test_the_verdict_follows_the_outputs_even_if_a_piece_silences_the_failure_list(
        settings: Settings, models: Models, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Capstone, "fail", lambda self, check, keys, message: None)  # what a tampering piece could do
    lines: list[str] = []
    sources = choose(settings, True, {"01": EXERCISES / "01-tree-mask" / "wrong" / "causal.py"})
    result = run(settings, sources, dataclasses.replace(Plan.fast(), prompts=1, samples=20), lines.append, models)
    assert result.ok and not result.passed  # no failure was recorded, yet the outputs differ
    assert "greedy outputs identical to plain decoding: no" in "\n".join(lines) and lines[-1].strip().startswith("FAIL")


def test_a_piece_counts_only_while_its_file_is_the_one_that_passed(settings: Settings, capsys) -> None:
    from practice.judgekit.catalog import discover
    from practice.judgekit.cli import cmd_list
    from practice.judgekit.progress import Progress

    mask = settings.workspace / "01-tree-mask.py"
    mask.write_text((EXERCISES / "01-tree-mask" / "solution.py").read_text())
    progress = Progress()
    progress.record_pass("01-tree-mask", mask)
    progress.save(settings.workspace)
    assert capstone_pieces.passed(settings) == {"01"}
    mask.write_text(mask.read_text() + "\n# edited after passing\n")
    assert capstone_pieces.passed(settings) == set()  # the package's mask until `test 1` passes it again
    cmd_list(settings, discover(EXERCISES))
    assert "tree-mask              changed" in capsys.readouterr().out
    Progress({"01-tree-mask"}).save(settings.workspace)  # a state file from before digests were kept
    assert capstone_pieces.passed(settings) == {"01"}


@pytest.mark.parametrize("wrong", ["no_sibling_residual.py"])  # no_q_update fails too (README)
def test_a_broken_sampler_fails_the_sampled_check(settings: Settings, models: Models, wrong: str) -> None:
    sources = choose(settings, True, {"07": EXERCISES / "07-tree-rejection" / "wrong" / wrong})
    cap = Capstone(settings, sources, Plan.fast(), lambda _: None, models)
    with one_thread():
        cap.sampled()
    assert cap.result.sampling_p is not None and cap.result.sampling_p <= 0.001
    assert [f.keys for f in cap.result.failures] == [["07"]]
    assert "verify_tree (exercise 07 tree-rejection)" in cap.result.failures[0].text()


def test_a_piece_that_never_returns_is_stopped_and_named(settings: Settings, models: Models, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    endless = tmp_path / "mask.py"
    endless.write_text("def tree_mask(parents):\n    while True:\n        pass\n")
    monkeypatch.setattr(capstone_pieces, "CALL_LIMIT_S", 0.2)
    cap = Capstone(settings, choose(settings, True, {"01": endless}), Plan(prompts=1, new_tokens=4), lambda _: None,
                   models)
    with one_thread():
        cap.greedy_rows()
    text = "\n".join(f.text() for f in cap.result.failures)
    assert cap.result.failures and all(f.keys == ["01"] for f in cap.result.failures), text
    assert "tree_mask (exercise 01 tree-mask)" in text and "did not return within 0.2 s" in text, text


def test_unusable_piece_is_named(settings: Settings, tmp_path: Path) -> None:
    bad = tmp_path / "mask.py"
    bad.write_text("def tree_mask(parents):\n    raise RuntimeError('not yet')\n")
    with pytest.raises(PieceError, match="does not define"):
        choose(settings, True, {"02": bad})
