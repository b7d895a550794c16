"""Every size a README promises is graded at that size: each exercise's `LIMITS` quotes its README (depth, node
count, context length, look-back, tensor rank, non-contiguous layouts, batch, ...) and the graded cases reach each
number; every "up to N" the README's grading text names is quoted by a limit."""
import re

import pytest

from practice.judgekit.catalog import discover
from practice.judgekit.grading import cases_module
from practice.judgekit.settings import PRACTICE, Settings
from practice.judgekit.spec import Context

EXERCISES = discover(PRACTICE / "exercises")


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_the_cases_reach_every_limit_the_readme_names(ex):
    cases = cases_module(ex)
    graded = cases.cases(Context("cpu", Settings().model_path()))
    readme = flat(ex.task())
    assert cases.LIMITS, f"{ex.name}: cases.py needs LIMITS (the sizes its README promises)"
    for limit in cases.LIMITS:
        assert flat(limit.text) in readme, f"{ex.name}: {limit.text!r} is not in its README"
        values = [limit.measure(case) for case in graded]
        reached = min(values) if limit.at_most else max(values)
        assert limit.reached(graded), (f"{ex.name}: the README promises {limit.text!r} ({limit.value}), "
                                       f"the cases reach {reached}")


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_every_up_to_in_a_readme_is_quoted_by_a_limit(ex):
    quoted = " | ".join(flat(limit.text) for limit in cases_module(ex).LIMITS)
    for phrase in re.findall(r"up to [\w\s,]*?\d[\d,]*(?: \w+)?", flat(ex.task())):
        assert phrase in quoted, f"{ex.name}: the README promises {phrase!r}; quote it in a LIMITS entry"


def test_a_proposer_that_looks_back_512_tokens_fails_exercise_12():
    ex = next(ex for ex in EXERCISES if ex.number == 12)
    cases = cases_module(ex)
    far = [c for c in cases.cases(Context("cpu", Settings().model_path())) if cases._lookback(c.args["context"],
                                                                                               c.args["n"]) > 512]
    assert far, "no graded match lies more than 512 tokens back"
    assert (ex.folder / "wrong" / "window_512.py").exists()


def test_every_practice_file_stays_under_400_lines():
    files = [*(PRACTICE.rglob("*.py")), *PRACTICE.parent.glob("tests/test_judge*.py"),
             *PRACTICE.parent.glob("tests/test_capstone*.py")]
    long = {str(path.relative_to(PRACTICE.parent)): n for path in files
            if "workspace" not in path.parts and (n := len(path.read_text().splitlines())) >= 400}
    assert not long, f"files of 400 lines or more: {long}"
