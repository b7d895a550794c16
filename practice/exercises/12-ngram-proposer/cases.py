"""n-gram proposer, exact; mistakes: oldest match, continuation off by one, suffix matching itself, an
occurrence not allowed to overlap the suffix, a fallback to a shorter n, n shortened to fit a short context,
matching digits of a string instead of whole tokens, a fixed look-back window of 64 or 512 tokens. The farthest graded match
starts 998 tokens back, the farthest a 1000-token context allows (LIMITS), so any fixed window fails."""
import random
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import tokens_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

FUNCTIONS = ("propose_ngram",)
NEEDS_MODEL = False



def _lookback(context: list[int], n: int) -> int:
    """How far back the rule's match starts: len(context) - n - s for the most recent earlier occurrence s (0: none)."""
    s = next((s for s in range(len(context) - n - 1, -1, -1) if context[s:s + n] == context[-n:]), None)
    return 0 if s is None or len(context) <= n else len(context) - n - s


def _random_context(length: int, vocab: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(length)]


SETUPS = [
    ("two earlier occurrences", [5, 6, 7, 1, 2, 5, 6, 9, 3, 4, 8, 5, 6], 2, 3),
    ("match near the end", [1, 2, 3, 4, 9, 9, 3, 4], 2, 5),
    ("no match", [1, 2, 3, 4, 5, 6], 2, 4),
    ("overlapping occurrences", [7, 7, 7, 7, 1, 7, 7], 2, 3),
    ("unigram", [4, 8, 15, 16, 23, 42, 8, 99, 15, 8], 1, 2),
    ("context too short", [3, 1], 2, 4),
    ("context shorter than n, where a shorter n-gram matches", [5, 5, 5], 4, 3),
    ("context of exactly n tokens, where a shorter n-gram matches", [6, 6, 6, 6], 4, 2),
    ("occurrence overlapping the suffix", [1, 2, 1, 2, 1, 2], 4, 3),
    ("no 2-gram match, a 1-gram match (no fallback)", [4, 9, 1, 4, 2, 9, 3, 4], 2, 3),
    ("whole tokens: [2, 3] is not inside [12, 3]", [12, 3, 5, 7, 2, 3], 2, 2),
    ("whole tokens: [1, 23] is not [12, 3]", [12, 3, 8, 9, 1, 23], 2, 3),
    ("k = 0", [1, 2, 3, 1, 2], 2, 0),
    ("n = len(context) - 1", [5, 6, 5, 6, 5], 4, 3),
    ("the most recent match is 998 tokens back", [7, 8, 9] + [(i * 7) % 50 + 100 for i in range(995)] + [7, 8], 2, 4),
    *((f"random context {i}", _random_context(length, vocab, 40 + i), n, k)
      for i, (length, vocab, n, k) in enumerate([(30, 3, 2, 4), (60, 4, 3, 5), (200, 5, 3, 8), (1000, 3, 6, 10),
                                                 (12, 2, 1, 3), (80, 6, 2, 2)])),
]
RULES = {
    "the most recent earlier occurrence (largest s)": ["two earlier occurrences", "overlapping occurrences"],
    "the match is followed by a token (the suffix does not match itself)": ["overlapping occurrences", "unigram"],
    "continuation context[s + n : s + n + k], fewer at the end": ["match near the end", "two earlier occurrences"],
    "the occurrence may overlap the suffix": ["occurrence overlapping the suffix", "n = len(context) - 1"],
    "no occurrence or len(context) <= n: []": ["no match", "context too short",
                                               "context shorter than n, where a shorter n-gram matches",
                                               "context of exactly n tokens, where a shorter n-gram matches"],
    "no fallback to a shorter n": ["no 2-gram match, a 1-gram match (no fallback)",
                                   "context shorter than n, where a shorter n-gram matches",
                                   "context of exactly n tokens, where a shorter n-gram matches"],
    "whole tokens are compared, not digits of a string": ["whole tokens: [2, 3] is not inside [12, 3]",
                                                          "whole tokens: [1, 23] is not [12, 3]"],
    "up to k (k = 0: [])": ["k = 0"],
    "any context length (no fixed window)": ["the most recent match is 998 tokens back", "random context 3"],
    "context is not modified (checked after every call)": ["two earlier occurrences"],
}
LIMITS = [Limit("random contexts of up to 1000 tokens", 1000, lambda c: len(c.args["context"])),
          Limit("a match 998 tokens back", 998, lambda c: _lookback(c.args["context"], c.args["n"])),
          Limit("contexts of at most n tokens where a shorter n-gram would match", 1,
                lambda c: len(c.args["context"]) <= c.args["n"] and _lookback(c.args["context"], 1) > 0)]


def cases(ctx: Context) -> list[Case]:
    return [Case(name, {"context": c, "n": n, "k": k}, f"context={c}, n={n}, k={k}") for name, c, n, k in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    return fns.propose_ngram(list(case.args["context"]), case.args["n"], case.args["k"])


def check(got: Any, expected: Any, case: Case) -> str | None:
    return tokens_mismatch(got, expected, "proposal")


def _lookup(context, n, k, starts, shift=0):
    if len(context) <= n:
        return []
    for s in starts(len(context), n):
        if context[s:s + n] == context[-n:]:
            return context[s + n + shift:s + n + shift + k]
    return []


MISTAKES = [
    Mistake("that continues the OLDEST occurrence; take the most recent one (scan from the end).",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(0, L - n))}),
    Mistake("the continuation is off by one: it starts right after the match, at s + n.",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(L - n - 1, -1, -1), shift=-1)}),
    Mistake("the suffix matched itself (s = len(context) - n), which has no continuation; only earlier "
            "occurrences count (s + n < len(context)).",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(L - n, -1, -1))}),
    Mistake("the occurrence was required to end before the suffix starts; it may overlap the suffix (only "
            "s + n < len(context) is required), e.g. [1, 2, 1, 2] occurs at s = 0 in [1, 2, 1, 2, 1, 2].",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(L - 2 * n, -1, -1))}),
    Mistake("without an n-gram match the proposal fell back to a shorter n; the rule has no fallback: "
            "no occurrence of the last n tokens means [].", {"propose_ngram": lambda c, n, k: _fallback(c, n, k)}),
    Mistake("n was shortened to fit a short context: when len(context) <= n there is no n-gram to look up, and "
            "the rule has no fallback to a shorter n: propose [].",
            {"propose_ngram": lambda c, n, k: _lookup(c, min(n, len(c) - 1), k, lambda L, n: range(L - n - 1, -1, -1))
             if len(c) > 1 else []}),
    Mistake("the match was found in a string of the tokens, so it matched parts of tokens (e.g. [2, 3] inside "
            "[12, 3]); compare whole tokens: context[s:s + n] == suffix.",
            {"propose_ngram": lambda c, n, k: _string_lookup(c, n, k)}),
    Mistake("only the last 64 tokens were searched; an occurrence may be anywhere earlier in the context.",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(L - n - 1, max(L - 65, -1), -1))}),
    Mistake("the search looked back only a fixed number of tokens (a window); an occurrence may be anywhere earlier "
            "in the context, however far back (here 998 tokens).",
            {"propose_ngram": lambda c, n, k: _lookup(c, n, k, lambda L, n: range(L - n - 1, max(L - n - 513, -1), -1))}),
]


def _string_lookup(context, n, k):
    if len(context) <= n:
        return []
    text = " ".join(map(str, context))
    at = text.rfind(" ".join(map(str, context[-n:])), 0, len(text) - len(" ".join(map(str, context[-n:]))))
    if at < 0:
        return []
    start = text[:at].count(" ") + n
    return context[start:start + k]


def _fallback(context, n, k):
    for m in range(n, 0, -1):
        found = _lookup(context, m, k, lambda L, m: range(L - m - 1, -1, -1))
        if found:
            return found
    return []
MISTAKES = with_rules(MISTAKES, RULES, [0, 2, 1, 3, 5, 4, 6, 8, 8])  # the README rule each mistake breaks
