"""The capstone's pieces: which exercise function plays which part of the decoder, and whose code runs it.

Each piece is one graded function. The capstone takes it from the learner's workspace file when that exercise
passed (`judge.py test` recorded the pass), from `exercises/NN/solution.py` with `--solutions`, from a given
file with `--piece NN=path`, and otherwise from the package (an adapter with the exercise's signature over
`tree_spec`). The exercise's own solution is also the reference every piece is checked against.
"""
from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mini_llm import Transformer
from tree_spec import (
    DraftTree, accept_greedy, build_draft_tree, build_dynamic_tree, depths, positions, tree_mask, verify_tree,
)
from tree_spec.core.contracts import LevelDrafter
from tree_spec.drafters.ngram import ngram_continuations

from .progress import Progress
from .settings import Settings
from .worker import LearnerError, import_file


@dataclass(frozen=True)
class Piece:
    """One exercise function in the decoder: `key` (its number), the exercise folder name, the function, its job."""

    key: str
    exercise: str
    function: str
    role: str

    @property
    def label(self) -> str:
        """'tree_mask (exercise 01 tree-mask)', as failures name it."""
        number, slug = self.exercise.split("-", 1)
        return f"{self.function} (exercise {number} {slug})"


PIECES: tuple[Piece, ...] = (
    Piece("01", "01-tree-mask", "tree_mask", "attention mask of every verify pass"),
    Piece("02", "02-depths-positions", "depths_and_positions", "RoPE positions of every verify pass"),
    Piece("03", "03-accept-path", "accept_greedy", "greedy acceptance walk"),
    Piece("09", "09-compact-path", "keep_path", "KV-cache compaction after every verify pass"),
    Piece("10", "10-tree-forward", "tree_logits", "verify without a cache (tree-forward check)"),
    Piece("11", "11-draft-tree", "build_tree", "draft trees from the MTP head"),
    Piece("12", "12-ngram-proposer", "propose_ngram", "prompt-lookup drafts"),
    Piece("13", "13-eagle2-tree", "eagle2_tree", "EAGLE-2 trees from the EAGLE head"),
    Piece("15", "15-confident-chain", "confident_chain", "confidence-stopped chains from the MTP head"),
    Piece("07", "07-tree-rejection", "verify_tree", "lossless verification under sampling"),
)
BY_KEY = {p.key: p for p in PIECES}
VERIFY_KEYS = ("01", "02", "03", "09")  # the greedy verify pass; the capstone unlocks once these pass
DRAFT_KEYS = ("11", "12", "13", "15")


CALL_LIMIT_S = 10.0  # a piece call (or import) still running after this long is stopped (POSIX)


class PieceError(Exception):
    """A piece raised or returned something unusable; `where` says on which prompt and position."""

    def __init__(self, piece: Piece, message: str, where: str = "") -> None:
        super().__init__(message)
        self.piece, self.message, self.where = piece, message, where


class PieceTimeout(BaseException):
    """Raised inside a piece by `time_limit` (a BaseException: a piece's `except Exception` does not swallow it)."""


def _expire(signum: int, frame: Any) -> None:
    raise PieceTimeout


@contextmanager
def time_limit() -> Iterator[None]:
    """Raise PieceTimeout in the code inside after CALL_LIMIT_S (SIGALRM: POSIX, main thread; elsewhere no limit).
    An alarm set by someone else (e.g. a test timeout) is put back afterwards with the time it had left."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT_S)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


def timeout_message() -> str:
    """What a failure says about a piece that `time_limit` stopped."""
    return f"did not return within {CALL_LIMIT_S:g} s (an endless loop?); the capstone stopped it"


def _package_tree_logits(model: Transformer, prefix: list[int], tokens: list[int], parents: list[int]) -> torch.Tensor:
    """Logits [n, V] of the tree after `prefix`: a fresh cache, a prefill, one forward with the tree's mask."""
    with torch.inference_mode():
        cache = model.new_cache(batch_size=1, max_len=len(prefix) + len(tokens))
        model(torch.tensor([prefix], device=model.device), cache=cache)
        return model(torch.tensor([tokens], device=model.device), cache=cache,
                     positions=positions(parents, len(prefix), model.device),
                     mask=tree_mask(parents, model.device))[0]


def _package_ngram(context: list[int], n: int, k: int) -> list[int]:
    """The package's prompt lookup (`ngram_continuations`, n-grams of exactly n): up to k drafts, each the token
    that followed the most recent earlier occurrence of the last n tokens so far."""
    seq, drafts = list(context), []
    for _ in range(k):
        _, followers = ngram_continuations(seq, n, n)
        if not followers:
            break
        drafts.append(followers[0])
        seq.append(followers[0])
    return drafts


class _TableDrafter:
    """A LevelDrafter over `next_logprobs(path)`: the log-probs after each frontier node's root path."""

    def __init__(self, next_logprobs: Callable[[list[int]], torch.Tensor]) -> None:
        self.next_logprobs = next_logprobs
        self.vocab_size, self.device = 0, torch.device("cpu")

    def next_logits(self, context, tokens, parents, frontier) -> torch.Tensor:
        rows = []
        for node in frontier:
            path = []
            while node >= 0:
                path.append(int(tokens[node]))
                node = parents[node]
            rows.append(self.next_logprobs(path[::-1]))
        return torch.stack(rows)


def _package_eagle2(root: int, next_logprobs: Callable[[list[int]], torch.Tensor], depth: int, top_k: int,
                    total_tokens: int) -> tuple[list[int], list[int]]:
    drafter: LevelDrafter = _TableDrafter(next_logprobs)
    tree = build_dynamic_tree(drafter, [], root, depth, top_k, total_tokens)
    return tree.tokens, tree.parents


def _tokens_parents(tree: DraftTree) -> tuple[list[int], list[int]]:
    return tree.tokens, tree.parents


PACKAGE: dict[str, Callable[..., Any]] = {
    "01": lambda parents: tree_mask(parents),
    "02": lambda parents, prefix_len: (depths(parents), positions(parents, prefix_len)),
    "03": accept_greedy,
    "09": lambda cache, start, path: cache.compact(start, path),
    "10": _package_tree_logits,
    "11": lambda drafter, context, root, branching: _tokens_parents(build_draft_tree(drafter, context, root, branching)),
    "12": _package_ngram,
    "13": _package_eagle2,
    "15": lambda drafter, context, root, k, theta: _tokens_parents(
        build_draft_tree(drafter, context, root, [1] * k, min_path_prob=theta)),
    "07": verify_tree,
}


@dataclass
class Source:
    """Where a piece's function came from: 'yours' (workspace), 'solution', 'file' (--piece) or 'package'."""

    kind: str
    path: Path | None
    fn: Callable[..., Any]


def load_function(piece: Piece, path: Path) -> Callable[..., Any]:
    """The piece's function from a .py file; a syntax or import error or a missing name raises PieceError."""
    try:
        with time_limit():
            module = import_file(path.resolve(), f"capstone_{piece.exercise.replace('-', '_')}")
    except LearnerError as e:
        raise PieceError(piece, str(e)) from None
    except PieceTimeout:
        raise PieceError(piece, f"importing {path.name} {timeout_message()}") from None
    fn = getattr(module, piece.function, None)
    if not callable(fn):
        raise PieceError(piece, f"{path.name} does not define `{piece.function}`")
    return fn


def reference(settings: Settings, piece: Piece) -> Callable[..., Any]:
    """The exercise's shipped solution: what every piece is checked against."""
    return load_function(piece, settings.exercises / piece.exercise / "solution.py")


def passed(settings: Settings) -> set[str]:
    """Keys of the pieces whose exercise passed with the workspace file as it is now (an edited file counts again only
    once `test` passes it again)."""
    progress = Progress.load(settings.workspace)
    return {p.key for p in PIECES if progress.still_passes(p.exercise, settings.workspace / f"{p.exercise}.py")}


def choose(settings: Settings, solutions: bool, overrides: dict[str, Path]) -> dict[str, Source]:
    """Every piece's source: --piece files first, then the solutions (--solutions) or the passing workspace
    files, else the package."""
    have = passed(settings)
    chosen = {}
    for piece in PIECES:
        if piece.key in overrides:
            chosen[piece.key] = Source("file", overrides[piece.key], load_function(piece, overrides[piece.key]))
        elif solutions:
            path = settings.exercises / piece.exercise / "solution.py"
            chosen[piece.key] = Source("solution", path, load_function(piece, path))
        elif piece.key in have:
            path = settings.workspace / f"{piece.exercise}.py"
            chosen[piece.key] = Source("yours", path, load_function(piece, path))
        else:
            chosen[piece.key] = Source("package", None, PACKAGE[piece.key])
    return chosen


def piece_key(text: str) -> str:
    """'1', '01', 'tree-mask' or '01-tree-mask' -> '01'."""
    for piece in PIECES:
        if text in (piece.key, piece.exercise, piece.exercise.split("-", 1)[1]) or (
                text.isdigit() and int(text) == int(piece.key)):
            return piece.key
    raise LookupError(f"no capstone piece {text!r}; pieces: {', '.join(p.exercise for p in PIECES)}")
