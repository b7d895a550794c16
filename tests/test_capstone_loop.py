"""The capstone's decoder is the package's loop: with the solutions plugged in (`PieceRules` in `speculate`), its
greedy output equals `tree_spec`'s own loop token for token; a piece that raises inside the verify hook is named
with its exercise and the new token it was deciding."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from practice.judgekit.capstone import Capstone, Models, Plan
from practice.judgekit.capstone_loop import Pieces, Shadow, speculate_with
from practice.judgekit.capstone_models import RowSpec, row_specs
from practice.judgekit.capstone_pieces import BY_KEY, PieceError, choose
from practice.judgekit.settings import PRACTICE, Settings
from tree_spec.analysis.clocks import one_thread
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.core.contracts import Proposer
from tree_spec.core.output import SpecOutput
from tree_spec.decoding.loop import speculate
from tree_spec.decoding.rules import PACKAGE_RULES
from .capstone_fixtures import models, settings  # noqa: F401 (fixtures)

FAST = Plan.fast()


def test_the_package_rules_are_immutable() -> None:
    with pytest.raises(AttributeError):
        PACKAGE_RULES.keep = None


@pytest.mark.parametrize("key", ["12", "11", "15"])  # prompt lookup (a chain), draft tree, confident chain
def test_with_the_solutions_the_capstone_decodes_as_the_package_loop(settings: Settings, models: Models,
                                                                     key: str) -> None:
    spec = next(s for s in row_specs(models) if s.key == key)
    sources = choose(settings, True, {})
    for i, prompt in enumerate(held_out_prompts(models.tokenizer, FAST.prompts)):
        pieces = Pieces(sources, f"prompt {i}")
        proposer = spec.learner(pieces, Shadow(BY_KEY[key], None))
        assert isinstance(proposer, Proposer)
        with one_thread():
            ours = speculate_with(models.target, proposer, prompt, FAST.new_tokens, pieces, spec.shape)
            theirs = _package(models, spec, prompt)
        assert len(ours.tokens) == FAST.new_tokens
        assert ours.tokens == theirs.tokens, f"prompt {i}"
        if key != "12":  # the same drafter: the same trees, so the same accepted drafts per pass
            assert ours.accepted_per_call == theirs.accepted_per_call, f"prompt {i}"


def _package(models: Models, spec: RowSpec, prompt: list[int]) -> SpecOutput:
    """The package's loop with the row's own drafter, in inference mode as the capstone runs it."""
    with torch.inference_mode():
        return speculate(models.target, spec.package, prompt, FAST.new_tokens, spec.shape)


def _starts(models: Models, settings: Settings, prompt: list[int]) -> list[int]:
    """The context length before each verify pass of the draft-tree row with the solutions."""
    spec = next(s for s in row_specs(models) if s.key == "11")
    pieces = Pieces(choose(settings, True, {}), "prompt 0")
    out = speculate_with(models.target, spec.learner(pieces, Shadow(BY_KEY["11"], None)), prompt, FAST.new_tokens,
                         pieces, spec.shape)
    starts = [len(prompt)]
    for accepted in out.accepted_per_call[:-1]:
        starts.append(starts[-1] + accepted + 1)
    return starts


def test_a_piece_raising_inside_the_verify_hook_is_named_with_its_exercise_and_position(
        settings: Settings, models: Models, tmp_path: Path) -> None:
    prompt = held_out_prompts(models.tokenizer, 2)[0]
    with one_thread():
        starts = _starts(models, settings, prompt)
    limit = len(prompt) + 5
    start = next(s for s in starts if s >= limit)
    positions = tmp_path / "positions.py"
    positions.write_text((PRACTICE / "exercises" / "02-depths-positions" / "solution.py").read_text() + f"""

_solved = depths_and_positions


def depths_and_positions(parents, prefix_len):
    if prefix_len >= {limit}:
        raise RuntimeError(f"refused prefix_len {{prefix_len}}")
    return _solved(parents, prefix_len)
""")
    sources = choose(settings, True, {"02": positions})
    spec = next(s for s in row_specs(models) if s.key == "11")
    pieces = Pieces(sources, "prompt 0")
    with one_thread(), pytest.raises(PieceError) as caught:
        speculate_with(models.target, spec.learner(pieces, Shadow(BY_KEY["11"], None)), prompt, FAST.new_tokens,
                       pieces, spec.shape)
    where = f"prompt 0, new token {start - len(prompt) + 1}"
    assert caught.value.piece.key == "02" and caught.value.where == where
    assert "refused prefix_len" in caught.value.message and positions.name in caught.value.message

    cap = Capstone(settings, sources, dataclasses.replace(FAST, prompts=1), lambda _: None, models)
    with one_thread():
        cap.greedy_rows()
    text = next(f.text() for f in cap.result.failures if f.check == f"{spec.name} row")
    assert "depths_and_positions (exercise 02 depths-positions)" in text and where in text, text
    assert "python practice/judge.py test 02" in text, text
