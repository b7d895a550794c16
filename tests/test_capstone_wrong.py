"""One policy per rule, shared by the exercises and the capstone: every shipped wrong file of a capstone piece fails
the capstone too (its rows, its constructed inputs or its sampled check), except the ones `capstone_rules.UNSEEN`
names with the reason the capstone cannot see them, each listed in practice/README.md; a tuple or NumPy result gets
the same verdict from an exercise and from the capstone; both use one chi-square threshold."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from practice.judgekit import capstone_sampled, compare, references, values
from practice.judgekit.capstone import Capstone, Models, Plan
from practice.judgekit.capstone_pieces import PIECES, choose
from practice.judgekit.capstone_rules import UNSEEN
from practice.judgekit.catalog import discover, resolve
from practice.judgekit.grading import cases_module
from practice.judgekit.settings import PRACTICE, Settings
from practice.judgekit.spec import Context
from practice.judgekit.wire import decode, encode
from practice.judgekit.worker import import_file
from tree_spec.analysis.clocks import one_thread
from .capstone_fixtures import models, settings  # noqa: F401 (fixtures)

EXERCISES = PRACTICE / "exercises"
SHORT = dataclasses.replace(Plan.fast(), prompts=1, new_tokens=8)
WRONG = [f"{piece.exercise}/wrong/{path.name}" for piece in PIECES
         for path in sorted((EXERCISES / piece.exercise / "wrong").glob("*.py"))]


def capstone_failures(settings: Settings, models: Models, key: str, path: Path) -> list[str]:
    """The capstone's checks that use piece `key`, with `path` as that piece: its failures' texts."""
    cap = Capstone(settings, choose(settings, True, {key: path}), SHORT, lambda _: None, models)
    with one_thread():
        cap.rule_walks()
        if key == "07":
            cap.sampled()
        else:
            cap.greedy_rows()
            if key == "10":
                cap.tree_forward()
    return [f.text() for f in cap.result.failures] + ([] if cap.result.rules_followed else ["rules not followed"])


def test_every_unseen_file_exists_and_the_readme_says_why() -> None:
    readme = (PRACTICE / "README.md").read_text()
    for name, reason in UNSEEN.items():
        assert (EXERCISES / name).exists(), name
        assert f"`{Path(name).stem}`" in readme, f"practice/README.md does not list {name} ({reason})"


@pytest.mark.parametrize("wrong", [w for w in WRONG if w not in UNSEEN])
def test_a_wrong_file_that_fails_its_exercise_fails_the_capstone(settings: Settings, models: Models,
                                                                 wrong: str) -> None:
    key = wrong[:2]
    failures = capstone_failures(settings, models, key, EXERCISES / wrong)
    assert failures, f"{wrong} fails exercise {key} but passes the capstone; add a check or list it in UNSEEN"
    assert all(f"test {key}" in text for text in failures if text.startswith("FAIL")), failures


def exercise_verdict(number: str, transform) -> bool:
    """Whether exercise `number` passes its solution with `transform` applied to each result (the worker's wire
    included), graded against the shipped reference."""
    ex = resolve(discover(EXERCISES), number)
    cases, ctx = cases_module(ex), Context("cpu", Settings().model_path())
    module = import_file(ex.folder / "solution.py", f"policy_{number}")
    fn = getattr(module, cases.FUNCTIONS[0])
    data = references.load_data(Settings().references, ex.name)
    learner = SimpleNamespace(**{cases.FUNCTIONS[0]: lambda *a, **k: transform(fn(*a, **k))})
    for case in cases.cases(ctx):
        tensors: dict = {}
        out = decode(encode(cases.call(learner, case, ctx), tensors), tensors)
        if cases.check(out, data["expected"][case.name], case) is not None:
            return False
    return True


TRANSFORMS = {
    "a tuple": lambda out: tuple(out),
    "NumPy ints": lambda out: [np.int64(v) for v in out],
    "a tuple of (tokens, parents) tuples": lambda out: (tuple(out[0]), tuple(out[1])),
    "(tokens, parents) of NumPy ints": lambda out: ([np.int32(v) for v in out[0]], [np.int64(v) for v in out[1]]),
    "floats": lambda out: [float(v) for v in out],
}
POLICY = [("03", "a tuple"), ("03", "NumPy ints"), ("03", "floats"), ("12", "a tuple"), ("12", "NumPy ints"),
          ("12", "floats"), ("11", "a tuple of (tokens, parents) tuples"), ("13", "(tokens, parents) of NumPy ints"),
          ("15", "a tuple of (tokens, parents) tuples")]


@pytest.mark.parametrize("number, form", POLICY)
def test_a_tuple_or_numpy_result_gets_the_same_verdict_from_the_exercise_and_the_capstone(
        settings: Settings, models: Models, tmp_path: Path, number: str, form: str) -> None:
    piece = next(p for p in PIECES if p.key == number)
    wrapped = tmp_path / f"{number}.py"
    wrapped.write_text(
        f"import numpy as np\nfrom practice.judgekit.settings import PRACTICE\nfrom practice.judgekit.worker import "
        f"import_file\n_solution = import_file(PRACTICE / 'exercises' / '{piece.exercise}' / 'solution.py', 'ref')\n"
        f"_transform = {TRANSFORM_SOURCE[form]}\n\n\ndef {piece.function}(*args, **kwargs):\n"
        f"    return _transform(_solution.{piece.function}(*args, **kwargs))\n")
    in_exercise = exercise_verdict(number, TRANSFORMS[form])
    in_capstone = not capstone_failures(settings, models, number, wrapped)
    assert in_exercise == in_capstone == (form != "floats"), (in_exercise, in_capstone)


TRANSFORM_SOURCE = {
    "a tuple": "lambda out: tuple(out)",
    "NumPy ints": "lambda out: [np.int64(v) for v in out]",
    "a tuple of (tokens, parents) tuples": "lambda out: (tuple(out[0]), tuple(out[1]))",
    "(tokens, parents) of NumPy ints": "lambda out: ([np.int32(v) for v in out[0]], [np.int64(v) for v in out[1]])",
    "floats": "lambda out: [float(v) for v in out]",
}


def test_one_chi_square_threshold_for_the_exercises_and_the_capstone() -> None:
    assert compare.law_holds is values.law_holds is capstone_sampled.law_holds
    assert values.law_holds(values.P_MIN) and not values.law_holds(values.P_MIN * 0.999)
    at_the_bar = capstone_sampled.Sampled(100, 3, [100, 0], 0.0, values.P_MIN)
    assert at_the_bar.passed and f"p >= {values.P_MIN:g}" in at_the_bar.line()


def test_the_solutions_follow_every_constructed_rule(settings: Settings, models: Models) -> None:
    files = {piece.key: EXERCISES / piece.exercise / "solution.py" for piece in PIECES}
    lines: list[str] = []
    cap = Capstone(settings, choose(settings, False, files), SHORT, lines.append, models)
    with one_thread():
        cap.rule_walks()
    assert not cap.result.failures and cap.result.rules_followed, [f.text() for f in cap.result.failures]
    assert any(line.startswith("rules on constructed inputs:") for line in lines), lines
