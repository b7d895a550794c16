"""Speedup formulas, rtol 1e-9 (the closed form's rounding near alpha = 0.9995 is ~1e-13 relative); mistakes: no
bonus token, one term short, draft cost ignored, inverted break-even, alpha near 1 taken as 1."""
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import float_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

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
    *(("expected_tokens", {"alpha": a, "k": k}) for a in (0.3, 0.9995, 1) for k in (0, 1, 8)),
    ("expected_tokens", {"alpha": 0, "k": 0}),
    *(("speedup", {"alpha": a, "k": k, "c": c}) for a, k, c in ((1.0, 4, 0.05), (0.0, 3, 0.2), (0.7, 0, 0.3),
                                                                   (0.9, 8, 0.0), (0.9995, 6, 0.5))),
    *(("break_even_alpha", {"verify_overhead": o, "k": k}) for o, k in ((0.0, 4), (2.5, 1), (0.05, 8))),
]
# README rule -> cases (names as built by `cases`)
RULES = {
    "E counts the target's own token (E(0, k) = 1)": ["expected_tokens(alpha=0.0, k=3)", "expected_tokens(alpha=0, k=0)"],
    "E = 1 + alpha + ... + alpha^k (k + 1 terms)": ["expected_tokens(alpha=0.8, k=4)", "expected_tokens(alpha=0.3, k=8)"],
    "E(1, k) = k + 1 (also for an int 1), exact near 1": ["expected_tokens(alpha=1.0, k=4)",
                                                          "expected_tokens(alpha=1, k=8)",
                                                          "expected_tokens(alpha=0.9995, k=8)"],
    "k = 0: one token per pass": ["expected_tokens(alpha=0.3, k=0)", "speedup(alpha=0.7, k=0, c=0.3)"],
    "S = E / (k c + 1)": ["speedup(alpha=0.8, k=4, c=0.05)", "speedup(alpha=0.9995, k=6, c=0.5)"],
    "break-even r = verify_overhead / k": ["break_even_alpha(verify_overhead=0.3, k=4)",
                                           "break_even_alpha(verify_overhead=2.5, k=1)"],
}
LIMITS = [Limit("α = 0.9995 (not 1", 0.9995, lambda c: c.args.get("alpha", 0) if c.args.get("alpha", 0) < 1 else 0),
          Limit("k = 0 (no drafts)", 0, lambda c: c.args["k"], at_most=True)]


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
            {"break_even_alpha": lambda verify_overhead, k: k / verify_overhead if verify_overhead else float("inf")}),
    Mistake("alpha close to 1 was treated as alpha = 1: only alpha == 1 exactly gives k + 1; the closed form is "
            "exact for every other alpha.",
            {"expected_tokens": lambda alpha, k: float(k + 1) if abs(1 - alpha) < 1e-3 else _e(alpha, k),
             "speedup": lambda alpha, k, c: (float(k + 1) if abs(1 - alpha) < 1e-3 else _e(alpha, k)) / (k * c + 1)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [0, 1, 4, 5, 2])  # the README rule each mistake breaks
