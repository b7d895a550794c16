"""The capstone's decoder: the package's loop (`tree_spec.decoding.loop.speculate`) with the rules of every verify
pass replaced by exercise functions (`PieceRules`, a `VerifyRules`), and proposers built from the learner's drafting
functions (capstone_drafters).

Per step: a proposer drafts a tree (tokens, parents) below the last committed token; the verify pass feeds it
with the piece-01 mask and the piece-02 positions in ONE target forward over the KV cache (or, cache-free,
through piece 10's `tree_logits`); piece 03 walks the accepted path (greedy) or piece 07 samples it; piece 09
keeps the path's K/V. The loop around them is the package's: request validation, proposal checks, features,
`observe_verify`, the EOS cut. Every call goes through `Pieces.call`, which checks what came back and turns an
exception, a malformed result or a call that does not return (`capstone_pieces.time_limit`) into a `PieceError`
that names the function, the exercise and where it happened.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mini_llm import KVCache, Transformer
from tree_spec import DraftTree, SamplingParams
from tree_spec.core.contracts import GREEDY, NO_TRACE, Branching, DynamicShape, Proposer, TargetFeatures, Trace
from tree_spec.core.output import SpecOutput
from tree_spec.core.topology import depths
from tree_spec.decoding.loop import speculate
from tree_spec.decoding.rules import VerifyRules

from .capstone_pieces import BY_KEY, Piece, PieceError, PieceTimeout, Source, time_limit, timeout_message
from .values import TYPE_POLICY, as_int, as_ints, kind


def root_path(path: Any, parents: Sequence[int]) -> list[int] | None:
    """`path` as a list of node ids (`values.as_ints`) when it is a root path: [0, child, grandchild, ...], each node
    a child of the one before; else None."""
    ids = as_ints(path)
    if not ids or ids[0] != 0 or not all(0 <= b < len(parents) and parents[b] == a for a, b in zip(ids, ids[1:])):
        return None
    return ids


def normal(value: Any) -> Any:
    """A piece's result as the judge reads it (`values`): a list or tuple of ints as a list, (tokens, parents) as a
    tuple of two lists; anything else as it is. Results are compared with the reference in this form."""
    if isinstance(value, tuple) and len(value) == 2 and all(as_ints(v) is not None for v in value):
        return as_ints(value[0]), as_ints(value[1])
    ints = as_ints(value)
    return value if ints is None else ints


def check_tree(out: Any, root: int, max_depth: int, vocab_size: int) -> DraftTree | str:
    """The DraftTree when `out` is (tokens, parents) of a valid tree of integers rooted at `root`, its tokens in
    [0, vocab_size), at most `max_depth` deep; else what is wrong."""
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"expected a tuple (tokens, parents), got {kind(out)}"
    tokens, parents = as_ints(out[0]), as_ints(out[1])
    if tokens is None or parents is None:
        return (f"tokens: {kind(out[0])}, parents: {kind(out[1])}; need two lists of ints ({TYPE_POLICY})")
    if len(tokens) != len(parents) or not tokens or tokens[0] != root:
        return f"tokens {tokens[:8]} / parents {parents[:8]}: need equal lengths and tokens[0] == root {root}"
    outside = [t for t in tokens if not 0 <= t < vocab_size]
    if outside:
        return f"token {outside[0]} is outside the vocabulary [0, {vocab_size})"
    try:
        deepest = max(depths(parents))
    except ValueError as e:
        return str(e)
    if deepest > max_depth:
        return f"the tree is {deepest} deep; the loop asked for at most {max_depth}"
    return DraftTree(tokens, parents)


@dataclass
class Shadow:
    """Checks a drafting piece against its reference on the same inputs; keeps the first disagreement and the
    thread CPU time the reference took (the timed rows subtract it)."""

    piece: Piece
    reference: Callable[..., Any] | None
    seconds: float = 0.0
    mismatch: str | None = None

    def compare(self, got: Any, where: str, args: Callable[[], tuple[Any, ...]]) -> None:
        """Run the reference on fresh args() and keep the first difference from `got`."""
        if self.reference is None or self.mismatch is not None:
            return
        start = time.thread_time()
        want = normal(self.reference(*args()))
        self.seconds += time.thread_time() - start
        got = normal(got)
        if got != want:
            self.mismatch = f"{where}: expected {_short(want)}, got {_short(got)}"


@dataclass
class Pieces:
    """The functions the decoder calls, by piece key, and where each came from. `prompt` (the runner's label) and
    `position` say where a failure happened: `locate(start)` sets the position from the `start` tokens before a
    step's root (`speculate_with` sets `prompt_len`). accept_shadow: checks piece 03's paths against the rule (a
    path cut short keeps the output identical)."""

    sources: dict[str, Source]
    prompt: str = ""
    accept_shadow: Shadow | None = None
    prompt_len: int = 0
    position: int = 0

    @property
    def where(self) -> str:
        return f"{self.prompt}, new token {self.position}"

    def locate(self, start: int) -> None:
        """A step whose root follows `start` tokens (prompt included) decides new token start - prompt_len + 1."""
        self.position = start - self.prompt_len + 1

    def fn(self, key: str) -> Callable[..., Any]:
        return self.sources[key].fn

    def call(self, key: str, *args: Any) -> Any:
        """Call piece `key` under the time limit; an exception becomes a PieceError with the frames from the
        piece's own file, a call past the limit a PieceError that says so."""
        source = self.sources[key]
        try:
            with time_limit():
                return source.fn(*args)
        except PieceError:
            raise
        except PieceTimeout:
            raise PieceError(BY_KEY[key], timeout_message(), self.where) from None
        except Exception as e:
            frames = [f for f in traceback.extract_tb(e.__traceback__)
                      if source.path is not None and f.filename == str(source.path.resolve())]
            text = "".join(traceback.format_list(frames) + traceback.format_exception_only(type(e), e)).rstrip()
            raise PieceError(BY_KEY[key], f"raised an exception:\n{text}", self.where) from None

    def fail(self, key: str, message: str) -> PieceError:
        return PieceError(BY_KEY[key], message, self.where)

    def mask(self, parents: list[int]) -> torch.Tensor:
        """Piece 01 -> bool [n, n]."""
        mask = self.call("01", parents)
        n = len(parents)
        if not (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and tuple(mask.shape) == (n, n)):
            got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise self.fail("01", f"returned {got} for parents {parents}; the verify pass needs a bool [{n}, {n}] tensor")
        return mask

    def positions(self, parents: list[int], prefix_len: int) -> torch.Tensor:
        """Piece 02 -> LongTensor [n]."""
        out = self.call("02", parents, prefix_len)
        pos = out[1] if isinstance(out, tuple) and len(out) == 2 else None
        if not (isinstance(pos, torch.Tensor) and not pos.is_floating_point() and tuple(pos.shape) == (len(parents),)):
            raise self.fail("02", f"returned {out!r:.120} for parents {parents}; the verify pass needs "
                                  f"(depths, positions) with an integer tensor [{len(parents)}] of positions")
        return pos.long()

    def accept(self, tokens: list[int], parents: list[int], logits: torch.Tensor) -> list[int]:
        """Piece 03 -> the accepted root path (node ids)."""
        out = self.call("03", tokens, parents, logits)
        path = root_path(out, parents)
        if path is None:
            raise self.fail("03", f"returned {out!r:.120} ({kind(out)}) for tokens {tokens}, parents {parents}: not "
                                  f"a path of node ids from the root 0, each a child of the one before ({TYPE_POLICY})")
        if self.accept_shadow is not None:
            self.accept_shadow.compare(path, self.where, lambda: (list(tokens), list(parents), logits))
        return path

    def sample_path(self, tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None
                    ) -> tuple[list[int], int]:
        """Piece 07 -> (accepted path, next token)."""
        out = self.call("07", tree.tokens, tree.parents, tree.draft_probs, target_probs, generator)
        path = root_path(out[0], tree.parents) if isinstance(out, tuple) and len(out) == 2 else None
        token = as_int(out[1]) if path is not None else None
        if path is None or token is None or not 0 <= token < target_probs.shape[-1]:
            raise self.fail("07", f"returned {out!r:.120} ({kind(out)}) for parents {tree.parents}: need (path of "
                                  f"node ids from 0, next token id) ({TYPE_POLICY})")
        return path, token

    def keep_path(self, cache: KVCache, start: int, path: list[int]) -> None:
        """Piece 09: compact the cache to the committed prefix plus the path."""
        self.call("09", cache, start, list(path))
        if cache.length != start + len(path):
            raise self.fail("09", f"left cache.length = {cache.length} after keep_path(cache, {start}, {path}); "
                                  f"expected {start + len(path)}")

    def tree_logits(self, model: Transformer, prefix: list[int], tokens: list[int], parents: list[int]
                    ) -> torch.Tensor:
        """Piece 10 -> logits [n, V]."""
        logits = self.call("10", model, list(prefix), list(tokens), list(parents))
        want = (len(tokens), model.cfg.vocab_size)
        if not (isinstance(logits, torch.Tensor) and tuple(logits.shape) == want):
            got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise self.fail("10", f"returned {got}; expected logits {list(want)}")
        return logits


def _short(value: Any) -> str:
    """(tokens, parents) -> 'tokens [...], parents [...]'; anything else as repr."""
    if isinstance(value, tuple) and len(value) == 2:
        return f"tokens {value[0]}, parents {value[1]}"
    return repr(value)


class PieceRules(VerifyRules):
    """The verify pass with the pieces: 01 mask and 02 positions (every tree, chains too), 03 the greedy path, 07
    the sampled one, 09 keep_path; the target pass is the package's."""

    def __init__(self, pieces: Pieces) -> None:
        self.pieces = pieces

    def layout(self, parents: list[int], start: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        self.pieces.locate(start)
        mask = self.pieces.mask(parents).to(device)
        return self.pieces.positions(parents, start).to(device), mask

    def accept(self, tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> tuple[list[int], int]:
        path = self.pieces.accept(tokens, parents, target_logits)
        return path, int(target_logits[path[-1]].argmax())

    def sample(self, tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None, chain: bool
               ) -> tuple[list[int], int]:
        return self.pieces.sample_path(tree, target_probs, generator)

    def keep(self, cache: KVCache, start: int, path: list[int], chain: bool) -> None:
        self.pieces.keep_path(cache, start, path)


class CacheFreeRules(PieceRules):
    """Every tree verified by piece 10 (`tree_logits`: a fresh prefill of the context per pass, no features); the
    loop's cache then only counts the committed tokens, its slots never read."""

    def layout(self, parents: list[int], start: int, device: torch.device) -> tuple[None, None]:
        self.pieces.locate(start)
        return None, None

    def forward(self, target: Transformer, drafter: Proposer, context: Sequence[int], tree: DraftTree,
                cache: KVCache, positions: None, mask: None) -> tuple[torch.Tensor, TargetFeatures | None]:
        return self.pieces.tree_logits(target, list(context), tree.tokens, tree.parents), None

    def keep(self, cache: KVCache, start: int, path: list[int], chain: bool) -> None:
        cache.length = start + len(path)


def speculate_with(
    target: Transformer,
    proposer: Proposer,
    prompt: Sequence[int],
    max_new_tokens: int,
    pieces: Pieces,
    shape: Branching | DynamicShape,
    sampling: SamplingParams = GREEDY,
    trace: Trace = NO_TRACE,
    cached: bool = True,
) -> SpecOutput:
    """The package's `speculate` (no EOS id: exactly `max_new_tokens`) with the pieces' verify rules, under
    inference mode as `generate` runs. proposer: under sampling its trees carry draft_probs. cached=False
    verifies each tree with piece 10 (`CacheFreeRules`) instead of over the KV cache."""
    pieces.prompt_len = len(prompt)
    rules = PieceRules(pieces) if cached else CacheFreeRules(pieces)
    with torch.inference_mode():
        return speculate(target, proposer, list(prompt), max_new_tokens, shape, sampling, trace=trace, rules=rules)
