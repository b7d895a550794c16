"""The capstone's decoder: the package's loop (`tree_spec.decoding.loop.speculate` / `verify`) with every rule
replaced by an exercise function, and proposers built from the learner's drafting functions.

Per step: a proposer drafts a tree (tokens, parents) below the last committed token; the verify pass feeds it
with the piece-01 mask and the piece-02 positions in ONE target forward over the KV cache (or, cache-free,
through piece 10's `tree_logits`); piece 03 walks the accepted path (greedy) or piece 07 samples it; piece 09
keeps the path's K/V. Every call goes through `Pieces.call`, which checks what came back and turns an exception,
a malformed result or a call that does not return (`capstone_pieces.time_limit`) into a `PieceError` that names
the function, the exercise and where it happened.
"""
from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mini_llm import KVCache, Transformer, sample_next
from tree_spec import DraftTree, SamplingParams
from tree_spec.core.contracts import GREEDY, NO_TRACE, Branching, DraftRequest, DynamicShape, Trace
from tree_spec.core.output import SpecOutput
from tree_spec.core.topology import depths, validate_parents
from tree_spec.decoding.loop import target_forward

from .capstone_pieces import BY_KEY, Piece, PieceError, PieceTimeout, Source, time_limit, timeout_message


def _is_path(path: Any, parents: Sequence[int]) -> bool:
    """A root path: [0, child, grandchild, ...] of ints, each node a child of the one before."""
    return (isinstance(path, list) and len(path) >= 1 and all(isinstance(i, int) for i in path) and path[0] == 0
            and all(0 <= b < len(parents) and parents[b] == a for a, b in zip(path, path[1:])))


def _check_tree(out: Any, root: int, max_depth: int) -> str | None:
    """None when `out` is (tokens, parents) of a valid tree rooted at `root`, at most `max_depth` deep."""
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list) and isinstance(out[1], list)):
        return f"expected (tokens, parents) as two lists, got {type(out).__name__}"
    tokens, parents = out
    if len(tokens) != len(parents) or not tokens or tokens[0] != root:
        return f"tokens {tokens[:8]} / parents {parents[:8]}: need equal lengths and tokens[0] == root {root}"
    try:
        validate_parents(parents)
    except ValueError as e:
        return str(e)
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return None if max(depth) <= max_depth else f"the tree is {max(depth)} deep; the loop asked for at most {max_depth}"


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
        want = self.reference(*args())
        self.seconds += time.thread_time() - start
        if got != want:
            self.mismatch = f"{where}: expected {_short(want)}, got {_short(got)}"


@dataclass
class Pieces:
    """The functions the decoder calls, by piece key, and where each came from. `prompt` (set by the runner) and
    `position` (set by the loop: the new token the step drafts after) say where a failure happened.
    accept_shadow: checks piece 03's paths against the rule (a path cut short keeps the output identical)."""

    sources: dict[str, Source]
    prompt: str = ""
    position: int = 0
    accept_shadow: Shadow | None = None

    @property
    def where(self) -> str:
        return f"{self.prompt}, new token {self.position}"

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
        path = self.call("03", tokens, parents, logits)
        if not _is_path(path, parents):
            raise self.fail("03", f"returned {path!r:.120} for tokens {tokens}, parents {parents}: "
                                  f"not a path of node ids from the root 0")
        if self.accept_shadow is not None:
            self.accept_shadow.compare(path, self.where, lambda: (list(tokens), list(parents), logits))
        return path

    def sample_path(self, tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None
                    ) -> tuple[list[int], int]:
        """Piece 07 -> (accepted path, next token)."""
        out = self.call("07", tree.tokens, tree.parents, tree.draft_probs, target_probs, generator)
        if not (isinstance(out, tuple) and len(out) == 2 and _is_path(out[0], tree.parents)
                and 0 <= int(out[1]) < target_probs.shape[-1]):
            raise self.fail("07", f"returned {out!r:.120} for parents {tree.parents}: "
                                  f"need (path of node ids from 0, next token id)")
        return out[0], int(out[1])

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


@dataclass
class Step:
    """One verify pass of the decoder (for the timeline): tokens fed and tokens committed."""

    fed: int
    committed: int


@dataclass
class Decoded:
    """One generation: the SpecOutput (tokens, τ counters) and its verify passes."""

    output: SpecOutput
    steps: list[Step] = field(default_factory=list)


@torch.inference_mode()
def decode(
    target: Transformer,
    proposer: Any,
    prompt: Sequence[int],
    max_new_tokens: int,
    pieces: Pieces,
    shape: Branching | DynamicShape,
    sampling: SamplingParams = GREEDY,
    trace: Trace = NO_TRACE,
    cached: bool = True,
) -> Decoded:
    """Speculative decoding of `max_new_tokens` after `prompt` with the pieces' rules (no EOS stop).

    proposer: a `Proposer` (`propose(DraftRequest) -> DraftTree`); under sampling its trees carry draft_probs.
    cached=False verifies each tree with piece 10 (a fresh prefill per pass) instead of the KV cache.
    """
    prompt = list(prompt)
    max_len = len(prompt) + max_new_tokens + shape.max_nodes + 1
    proposer.reset(max_len)
    out, steps = SpecOutput(), []
    ids = torch.tensor([prompt], device=target.device)
    cache = target.new_cache(batch_size=1, max_len=max_len) if cached else None
    with trace.span("prefill", tokens=len(prompt)):
        if cached:
            logits, feats = target_forward(target, proposer, ids, cache)
        else:
            logits, feats = target(ids)[0], None
    if feats is not None:
        proposer.observe(feats)
    out.target_calls = 1
    out.tokens.append(int(sample_next(logits[-1:], sampling.temperature, sampling.top_k, sampling.top_p,
                                      sampling.generator)))
    while len(out.tokens) < max_new_tokens:
        context, root = prompt + out.tokens[:-1], out.tokens[-1]
        pieces.position = len(out.tokens)
        with trace.span("draft"):
            tree = proposer.propose(DraftRequest(context, root, shape, max_new_tokens - len(out.tokens) - 1,
                                                 sampling, trace))
        tokens, parents, n, start = tree.tokens, tree.parents, len(tree.tokens), len(context)
        with trace.span("verify", tokens=n):
            if cached:
                mask = pieces.mask(parents).to(target.device)
                pos = pieces.positions(parents, start).to(target.device)
                logits, feats = target_forward(target, proposer, torch.tensor([tokens], device=target.device),
                                               cache, pos, mask)
            else:
                logits, feats = pieces.tree_logits(target, context, tokens, parents), None
        if sampling.greedy:
            path = pieces.accept(tokens, parents, logits)
            next_token = int(logits[path[-1]].argmax())
        else:
            path, next_token = pieces.sample_path(tree, sampling.probs(logits), sampling.generator)
        if cached:
            pieces.keep_path(cache, start, path)
        if feats is not None:
            proposer.observe(feats.rows(path))
        out.commit([tokens[i] for i in path[1:]], next_token, n - 1, max(depths(parents)), frozenset())
        steps.append(Step(n, len(path)))
    return Decoded(out, steps)
