"""What an exercise's cases.py provides, and the context the worker hands it.

cases.py defines:
    FUNCTIONS: tuple[str, ...]          names the learner's file must define
    NEEDS_MODEL: bool                   whether grading loads the real model
    cases(ctx) -> list[Case]            deterministic inputs
    call(fns, case, ctx) -> output      runs the learner's (or the solution's) functions on one case
    check(got, expected, case) -> str | None   None when `got` is right, else what is wrong
    MISTAKES: list[Mistake]             models of common errors; their outputs are recorded too, and a
                                        failing output that matches one gets that mistake's message
    expected(case, ctx) -> output       optional: the exact answer (statistical exercises), used as the
                                        reference instead of the solution's output
    RULES: dict[str, list[str]]         each README rule -> the names of the cases that fail when it is
                                        broken (tests/test_judge_rules.py checks the names)
    LIMITS: list[Limit]                 every size the README promises the cases reach (depth, nodes, context,
                                        look-back, rank, layout, batch), quoted from it, and what each case
                                        reaches (tests/test_judge_limits.py checks both)

The functions handed to call() check their arguments after every call (judgekit.guard): a learner function
that changes one fails that case with a message naming the argument. Generated inputs come from
judgekit.gen, reproducibility runs from judgekit.repro; both files are hashed with cases.py.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any



class ModelUnavailable(Exception):
    """The real model cannot be loaded here (missing, or a half-written export)."""


@dataclass
class Case:
    """One graded input. `args` are passed to the learner's function; `note` describes it in messages."""

    name: str
    args: dict[str, Any]
    note: str = ""


@dataclass(frozen=True)
class Limit:
    """A size the README promises the graded cases reach: `text` quotes the README (whitespace aside), `value` is
    the number it names, `measure(case)` what one case reaches (0 when it does not apply). The cases reach the limit
    when some case measures >= value (`at_most=True`: <= value, for a promised minimum such as `prefix_len` 0)."""

    text: str
    value: float
    measure: Callable[[Case], float]
    at_most: bool = False

    def reached(self, cases: list[Case]) -> bool:
        values = [self.measure(case) for case in cases]
        return min(values) <= self.value if self.at_most else max(values) >= self.value


@dataclass
class Mistake:
    """A plausible error: `functions` replace the solution's, `message` explains the fix, `rule` is the RULES key it
    breaks (`with_rules`)."""

    message: str
    functions: dict[str, Callable[..., Any]]
    rule: str | None = None


@dataclass
class Context:
    """Per-worker state handed to cases(): device, the real model (loaded once), sampling budget.

    trials_scale multiplies the number of samples of statistical cases (larger when recording the
    mistakes' distributions).
    """

    device: str
    model_path: Path
    trials_scale: int = 1
    _model: Any = field(default=None, repr=False)

    def model(self):
        """The real model (mini_llm Transformer, fp32, eval mode) on `device`, loaded on first use.

        Raises ModelUnavailable (with the reason) when the folder is missing or unreadable.
        """
        if self._model is None:
            try:
                from mini_llm import load_model

                self._model = load_model(self.model_path, device=self.device)
            except Exception as e:
                raise ModelUnavailable(f"cannot load the model from {self.model_path}: {e}") from e
        return self._model

    def trials(self, n: int) -> int:
        return n * self.trials_scale


def with_rules(mistakes: list[Mistake], rules: dict[str, list[str]], which: list[int]) -> list[Mistake]:
    """The mistakes, each with the rule it breaks: which[i] indexes the RULES key of mistakes[i] (a verdict names it
    with the mistake's 'Likely mistake' line, and on each failing case)."""
    keys = list(rules)
    return [Mistake(m.message, m.functions, keys[i]) for m, i in zip(mistakes, which, strict=True)]
