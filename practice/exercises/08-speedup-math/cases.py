"""Speedup formulas, rtol 1e-9; mistakes: no bonus token, one term short, draft cost ignored, inverted break-even."""
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import float_mismatch
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("expected_tokens", "speedup", "break_even_alpha")
NEEDS_MODEL = False

SETUPS = [
    ("expected_tokens", {"alpha": 0.8, "k": 4}),
    ("expected_tokens", {"alpha": 0.6, "k": 2}),
    ("expected_tokens", {"alpha": 0.0, "k": 3}),
    ("expected_tokens", {"alpha": 1.0, "k": 4}),
    ("speedup", {"alpha": 0.8, "k": 4, "c": 0.05}),
    ("speedup", {"alpha": 0.55, "k": 3, "c": 0.2}),
    ("break_even_alpha", {"verify_overhead": 0.3, "k": 4}),
    ("break_even_alpha", {"verify_overhead": 1.2, "k": 3}),
]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{fn}({', '.join(f'{k}={v}' for k, v in args.items())})", {"fn": fn, **args}) for fn, args in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    args = dict(case.args)
    return getattr(fns, args.pop("fn"))(**args)


def check(got: Any, expected: Any, case: Case) -> str | None:
    return float_mismatch(got, expected, case.args["fn"])


def _e(alpha, k):
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


MISTAKES = [
    Mistake("the target's own token (bonus/correction) is missing: E = 1 + alpha + ... + alpha^k, which is "
            "1 at alpha = 0.", {"expected_tokens": lambda alpha, k: _e(alpha, k) - 1,
                                "speedup": lambda alpha, k, c: (_e(alpha, k) - 1) / (k * c + 1)}),
    Mistake("one term short: the sum runs to alpha^k, so the closed form has alpha^(k+1) (k + 1 at alpha = 1).",
            {"expected_tokens": lambda alpha, k: _e(alpha, k - 1),
             "speedup": lambda alpha, k, c: _e(alpha, k - 1) / (k * c + 1)}),
    Mistake("the drafting cost is missing: a step costs k * c + 1 target forwards, so divide E by it.",
            {"speedup": lambda alpha, k, c: _e(alpha, k)}),
    Mistake("break-even inverted: 1 + k * alpha = 1 + verify_overhead gives alpha = verify_overhead / k.",
            {"break_even_alpha": lambda verify_overhead, k: k / verify_overhead}),
]
