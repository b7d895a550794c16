"""The capstone (practice/judgekit/capstone*.py) in its fast mode: the solutions pass every check, a wrong file
from an exercise's wrong/ folder fails and is named, and a broken tree sampler fails the sampled check."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from practice.judgekit.capstone import Capstone, Plan, run
from practice.judgekit.capstone_pieces import PieceError, Source, choose
from practice.judgekit.settings import PRACTICE, Settings
from tree_spec.analysis.clocks import one_thread

EXERCISES = PRACTICE / "exercises"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dataclasses.replace(Settings(), workspace=tmp_path)


def test_solutions_pass_every_check(settings: Settings) -> None:
    lines: list[str] = []
    result = run(settings, choose(settings, True, {}), Plan.fast(), lines.append)
    assert result.ok, "\n".join(lines)
    assert all(r.identical == r.pkg_identical == Plan.fast().prompts for r in result.rows)
    assert result.sampling_p is not None and result.sampling_p > 0.001
    assert result.figure is not None and result.figure.exists()
    assert any(line.strip().startswith("PASS") for line in lines)


@pytest.mark.parametrize("key, wrong, label", [
    ("01", "01-tree-mask/wrong/causal.py", "tree_mask (exercise 01 tree-mask)"),
    ("03", "03-accept-path/wrong/own_row.py", "accept_greedy (exercise 03 accept-path)"),
    ("12", "12-ngram-proposer/wrong/oldest_match.py", "propose_ngram (exercise 12 ngram-proposer)"),
])
def test_a_wrong_file_is_named_with_its_exercise(settings: Settings, key: str, wrong: str, label: str) -> None:
    with one_thread():
        cap = Capstone(settings, choose(settings, True, {key: EXERCISES / wrong}), Plan(prompts=1, new_tokens=16),
                       lambda _: None)
        cap.greedy_rows()
    text = "\n".join(f.text() for f in cap.result.failures)
    assert cap.result.failures and all(f.keys == [key] for f in cap.result.failures), text
    assert label in text and f"python practice/judge.py test {key}" in text and "prompt 0, new token" in text
    if key == "01":  # a wrong mask changes the output: the first diverging token is shown
        assert "expected" in text and "got" in text and "(id " in text


def _first_child_sampler(tokens, parents, draft_probs, target_probs, generator):
    """Broken: always accepts the first child (the draft's law, not the target's)."""
    path = [0]
    while (kids := [i for i, p in enumerate(parents) if p == path[-1]]):
        path.append(kids[0])
    return path, int(target_probs[path[-1]].multinomial(1, generator=generator))


def test_broken_sampler_fails_the_sampled_check(settings: Settings) -> None:
    sources = choose(settings, True, {})
    sources["07"] = Source("file", None, _first_child_sampler)
    with one_thread():
        cap = Capstone(settings, sources, Plan.fast(), lambda _: None)
        _, p, _ = cap.sampled()
    assert p <= 0.001


def test_unusable_piece_is_named(settings: Settings, tmp_path: Path) -> None:
    bad = tmp_path / "mask.py"
    bad.write_text("def tree_mask(parents):\n    raise RuntimeError('not yet')\n")
    with pytest.raises(PieceError, match="does not define"):
        choose(settings, True, {"02": bad})
