"""Trees chosen for the hardware: a drafter's rank-acceptance profile, this machine's costs, the best tree.

    python -m tree_spec.tune [--drafter small-model int4-self medusa eagle eagle3 mtp] [--prompts 16]
                             [--new-tokens 64] [--validate-prompts 4]

1. Rank-acceptance profile (`measure_rank_profile`): walk the target's own greedy continuation of held-out
   prompts; at every position ask the drafter for its next-token logits at depths d = 1..D along that path
   and record the rank r of the target's token among the draft's candidates (r = 1: its top-1). A tree whose
   level d gives every node its top-w_d children accepts depth d exactly when r_d <= w_d at every depth up
   to d (siblings are alternatives of one distribution: at most one of them matches). The profile keeps each
   position's ranks up to its first miss, in order, so `RankProfile.tokens_per_pass(branching)` replays the
   decoder on the measured text: a pass at position t accepts a(t) = Σ_d Π_{j<=d} 1[r_j <= w_j] tokens and the
   next pass starts at t + a(t) + 1 (no independence assumption, and only the positions a real run visits,
   which are more often right after a miss). `RankProfile.table()` gives P(rank r at depth d | depths < d
   within the top-R) over all positions, for printing.
2. Costs (`measure_costs`): one target forward over n new tokens (`tree_spec.costs.measure_target_costs`,
   tree-shaped mask, measured in the same process), the drafter's ms per call (= per tree level) fitted as
   a + b·(frontier nodes) + c·[first level], and the rest of a step (Python, the target's hidden states,
   compaction) as a constant per step; all with one torch thread and thread CPU time.
3. Search (`rank_shapes`): every per-level branching list (widths <= `max_width`, depth <= D, nodes <=
   `max_nodes`) scored by predicted ms per token = (verify(nodes + 1) + Σ_levels draft + overhead) / tokens
   per pass. `tree_speculative_generate` takes a per-level `branching`, so general (non-uniform) trees are not
   searched: Sequoia's DP over general trees would need a verifier that takes any parents list.
4. Validation (default on): the best predicted shapes and the benchmark's fixed shapes run for real on other
   held-out prompts (interleaved, twice, thread time); the fastest measured shape is saved, unless it beats
   the benchmark's fixed shape by less than `MARGIN` (then the fixed shape is kept: the difference is noise).
   For head drafters the reduced draft vocabularies (`--vocab`, e.g. the 1024 most frequent target tokens, EAGLE-3's d2t idea) are
   candidates too.

5. Confidence stop (recurrent heads: EAGLE-1, EAGLE-3, MTP; with validation): chains of up to k drafts that stop
   once the draft's path probability falls below θ (`speculative_generate(..., min_path_prob=θ)`) run for
   THETAS on the same prompts; the fastest θ is saved as `confidence_stop`, unless it beats the benchmark's
   default (`tree_spec.bench.CONFIDENCE_STOP`) by less than `MARGIN`. The benchmark's "confidence stop" rows
   read it.

Output: `models/tuned/<drafter>.json` with drafter, form ("chain" or "tree"), branching, k (chains),
draft_vocab (N or null), predicted_tau, predicted_ms_per_token, the measured validation rows, the profile,
the cost terms and the cost curve. `tuned_drafter(name, target)` rebuilds the saved drafter and its
branching (the benchmark uses it for its "(tuned)" rows).
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch

from mini_llm import KVCache, Transformer, generate, load_model, load_tokenizer
from mini_llm.load import MODELS_DIR, resolve_model_path

from .costs import CostCurve, hardware_name, measure_target_costs, one_thread
from .drafters import Drafter, ModelDrafter, QuantizedSelfDrafter, as_drafter
from .head_io import load_head
from .output import SpecOutput
from .prompts import held_out_prompts, training_windows
from .speedup import tree_node_count
from .chain import speculative_generate
from .tree import speculate, target_forward, tree_speculative_generate

TUNED_DIR = MODELS_DIR / "tuned"
# a validated shape replaces the benchmark's fixed one only when it is this much faster: two validation
# runs of the same shape on this shared 2-core machine differ by a few percent
MARGIN = 0.04
THETAS = (0.1, 0.2, 0.3, 0.4, 0.5)  # confidence-stop thresholds tried for recurrent heads
CONFIDENCE_DRAFTERS = ("eagle", "eagle3", "mtp")  # drafters that pay one call per draft depth
DRAFTERS = ("small-model", "int4-self", "medusa", "eagle", "eagle3", "mtp")
HEAD_FOLDERS = {"medusa": "medusa", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"}
# the benchmark's fixed-shape rows per drafter (branching lists; [1] * k is a chain): validated beside the
# search's best, and kept unless beaten by MARGIN. EAGLE-3's benchmark row is EAGLE-2's dynamic tree, not a shape.
FIXED_SHAPES = {
    "small-model": [[1, 1, 1, 1], [2, 2, 1, 1]],
    "int4-self": [[2, 2, 1, 1]],
    "medusa": [[3, 2, 2, 1]],
    "eagle": [[3, 2, 1, 1, 1]],
    "eagle3": [],
    "mtp": [[1, 1, 1, 1]],
}
# more shapes always validated: the short chain (k = 3) of the model drafters
ALSO_VALIDATED = {"eagle": [[1, 1, 1]], "eagle3": [[1, 1, 1], [3, 2, 1, 1, 1]], "mtp": [[1, 1, 1]]}


# ---------------------------------------------------------------- the draft vocabulary (reduced LM head)

def frequent_tokens(tokenizer, vocab_size: int, windows: int = 256, length: int = 256) -> list[int]:
    """All token ids [vocab_size], most frequent first, counted on training windows (never held-out text).

    The first N of them are the reduced draft vocabulary of size N.
    """
    ids = training_windows(tokenizer, windows, length, seed=0).flatten()
    counts = torch.bincount(ids, minlength=vocab_size)[:vocab_size]
    return sorted(range(vocab_size), key=lambda t: (-int(counts[t]), t))


def token_order(model_name: str, tokenizer, vocab_size: int) -> list[int]:
    """`frequent_tokens` for this model, cached in models/tuned/token_frequency-<model>.json."""
    path = TUNED_DIR / f"token_frequency-{Path(model_name).name}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if len(saved["order"]) == vocab_size:
            return saved["order"]
    order = frequent_tokens(tokenizer, vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": model_name, "source": "training_windows(tokenizer, 256, 256, seed=0)",
                                "order": order}) + "\n")
    return order


# ---------------------------------------------------------------- rank-acceptance profile

@dataclass
class RankProfile:
    """Where the target's greedy token sits among a drafter's candidates, depth by depth, position by position.

    sequences[p][t]: the ranks "r1 r2 ..." at depths 1, 2, ... of position t of prompt p's greedy continuation,
    up to the first miss (a rank above max_rank ends the string; "" = missed at depth 1).

    Two averages. `reach(branching)` (the default, walk=True) follows the decoder: from position t a pass with
    this branching accepts a(t) tokens and the next root is t + a(t) + 1, so it averages over the positions a
    real run visits. Those are more often right after a rejection, where the draft tends to miss again, so the
    plain average over every position (walk=False, and `table()`) overstates tokens per pass.
    """

    drafter: str
    max_rank: int
    depth: int
    sequences: list[list[str]]
    model: str = ""
    new_tokens: int = 0
    draft_vocab: int | None = None

    @property
    def positions(self) -> int:
        return sum(len(seq) for seq in self.sequences)

    def _ranks(self) -> np.ndarray:
        """ranks [positions, depth], every prompt's positions in order (max_rank + 1 from the first miss on)."""
        if getattr(self, "_cached", None) is None:
            ranks = np.full((self.positions, self.depth), self.max_rank + 1, dtype=np.int64)
            for i, key in enumerate(k for seq in self.sequences for k in seq):
                rs = [int(r) for r in key.split()]
                ranks[i, :len(rs)] = rs
            self._cached = ranks
        return self._cached

    def reach(self, branching: Sequence[int], walk: bool = True) -> list[float]:
        """P(depths 1..d all accepted) for d = 1..len(branching): the fraction of positions (those a decoder
        with this branching visits, or all of them) whose rank at every depth j <= d is within branching[j-1]."""
        return self.reach_many([branching], walk)[0, :len(branching)].tolist()

    def reach_many(self, shapes: Sequence[Sequence[int]], walk: bool = True) -> np.ndarray:
        """reach() of many branching lists -> [len(shapes), depth] (zero beyond each list's depth)."""
        if any(len(s) > self.depth for s in shapes):
            raise ValueError(f"the profile was measured to depth {self.depth}")
        if any(w > self.max_rank for s in shapes for w in s):
            raise ValueError(f"the profile records ranks up to {self.max_rank}")
        ranks = self._ranks()
        starts = np.cumsum([0] + [len(seq) for seq in self.sequences])
        out = np.zeros((len(shapes), self.depth))
        for i in range(0, len(shapes), 256):
            chunk = shapes[i:i + 256]
            widths = np.zeros((len(chunk), self.depth), dtype=np.int64)
            for j, sh in enumerate(chunk):
                widths[j, :len(sh)] = sh
            passed = np.cumprod(ranks[None, :, :] <= widths[:, None, :], axis=2)  # [S, N, D]
            if not walk:
                out[i:i + len(chunk)] = passed.mean(axis=1)
                continue
            accepted = passed.sum(axis=2)  # [S, N]
            for j in range(len(chunk)):
                visited = []
                for lo, hi in zip(starts[:-1], starts[1:]):
                    t = lo
                    while t < hi:
                        visited.append(t)
                        t += accepted[j, t] + 1
                out[i + j] = passed[j, visited].mean(axis=0)
        return out

    def tokens_per_pass(self, branching: Sequence[int], walk: bool = True) -> float:
        """Predicted tokens per verify pass (the target's own token counted): 1 + Σ_d reach."""
        return 1.0 + sum(self.reach(branching, walk))

    def table(self) -> list[list[float]]:
        """[depth][max_rank]: P(the target's token is the draft's rank-r candidate at depth d | every depth
        before d was within the top max_rank), over every position (Sequoia's positional acceptance, per depth)."""
        ranks = self._ranks()
        out = []
        for d in range(self.depth):
            alive = (ranks[:, :d] <= self.max_rank).all(axis=1)
            total = alive.sum()
            out.append([float((alive & (ranks[:, d] == r)).sum() / total) if total else 0.0
                        for r in range(1, self.max_rank + 1)])
        return out

    def describe(self, ranks_shown: int = 4) -> str:
        """The table as text, with the top-w cumulative columns."""
        table = self.table()
        head = " ".join(f"r={r}".rjust(6) for r in range(1, ranks_shown + 1))
        lines = [f"{self.drafter}: P(target token = draft's rank-r candidate at depth d | shallower depths in "
                 f"the top {self.max_rank}), {self.positions} positions",
                 f"  depth {head}   top-1  top-2  top-4"]
        for d, row in enumerate(table, 1):
            cum = np.cumsum(row)
            lines.append(f"  {d:5d} " + " ".join(f"{p:6.3f}" for p in row[:ranks_shown]) +
                         f"   {cum[0]:.3f}  {cum[min(1, len(cum) - 1)]:.3f}  {cum[min(3, len(cum) - 1)]:.3f}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "RankProfile":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def _rank(logits: torch.Tensor, token: int) -> int:
    """1-based rank of `token` in logits [V] (1 = the argmax); V + 1 if its logit is -inf (never proposed)."""
    value = logits[token]
    if value == float("-inf"):
        return logits.shape[-1] + 1
    return 1 + int((logits > value).sum())


@torch.inference_mode()
def measure_rank_profile(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompts: Sequence[Sequence[int]],
    new_tokens: int = 64,
    depth: int = 8,
    max_rank: int = 8,
    name: str = "",
    vocab_subsets: dict[int, torch.Tensor] | None = None,
) -> dict[int | None, RankProfile]:
    """Rank profiles of `drafter` along the target's greedy continuation of each prompt.

    At each of the first `new_tokens` positions t the drafter sees the committed context (and, for feature
    drafters, the target's features of it) and drafts a chain along the target's own tokens g_{t+1..t+depth};
    the rank of g_{t+d} in its depth-d logits is recorded. One target decode step per position (the root),
    `depth` drafter calls. vocab_subsets: {N: token ids} -> also the profile the drafter would have with its
    proposals restricted to those ids (ranks among them). Returns {None: full profile, N: ...}.
    """
    drafter = as_drafter(drafter)
    if hasattr(drafter, "head") and hasattr(drafter.head, "num_heads"):
        depth = min(depth, drafter.head.num_heads)  # Medusa drafts at most num_heads deep
    subsets = dict(vocab_subsets or {})
    members = {n: torch.zeros(drafter.vocab_size, dtype=torch.bool, device=drafter.device).index_fill_(0, ids.to(drafter.device), True)
               for n, ids in subsets.items()}
    keys = [None, *subsets]
    sequences: dict[int | None, list[list[str]]] = {key: [] for key in keys}
    for prompt in prompts:
        prompt = list(prompt)
        reference = generate(target, torch.tensor([prompt], device=target.device), new_tokens + depth + 1)[0].tolist()
        ranks_here: list[list[int]] = []

        def step(drafter: Drafter, cache: KVCache, context: list[int], root: int, max_depth: int):
            t = len(context) - len(prompt)
            chain = reference[t:t + depth + 1]
            if chain[0] != root:
                raise RuntimeError("the walk left the target's greedy path")
            rows = [drafter.next_logits(context, chain[:d], [-1, *range(d - 1)], [d - 1])[0] for d in range(1, depth + 1)]
            ranks_here.append([_rank(r.float(), g) for r, g in zip(rows, chain[1:])])
            for n, member in members.items():
                ranks_here.append([_rank(torch.where(member, r.float(), float("-inf")), g) for r, g in zip(rows, chain[1:])])
            logits, feats = target_forward(target, drafter, torch.tensor([[root]], device=target.device), cache)
            return [], int(logits[-1].argmax()), 0, 0, feats

        speculate(target, drafter, prompt, new_tokens + 1, depth + 1, step, 0.0, None, None, None, None)
        for i, key in enumerate(keys):
            sequences[key].append([" ".join(map(str, itertools.takewhile(lambda r: r <= max_rank, ranks)))
                                   for ranks in ranks_here[i::len(keys)]])
    return {key: RankProfile(name, max_rank, depth, seqs, new_tokens=new_tokens, draft_vocab=key)
            for key, seqs in sequences.items()}


# ---------------------------------------------------------------- costs of a step on this machine

@dataclass
class StepCosts:
    """ms of one speculative step = verify + Σ over levels of draft + overhead.

    verify: curve.ms(nodes + 1) + verify_extra_ms (what a real verify pays beyond the curve's forward: the
    hidden states for feature drafters); draft per level = draft_ms + draft_per_node_ms · frontier +
    draft_first_ms on level 1 (which also catches the drafter up on the committed tokens); overhead_ms: the
    rest of the step (Python tree building, acceptance, cache compaction).
    """

    curve: CostCurve
    draft_ms: float
    draft_per_node_ms: float
    draft_first_ms: float
    verify_extra_ms: float
    overhead_ms: float
    plain_ms_per_token: float

    def step_ms(self, branching: Sequence[int]) -> dict[str, float]:
        """{"verify", "draft", "overhead", "total"} ms of one step with this branching."""
        frontier, draft = 1, 0.0
        for level, width in enumerate(branching):
            draft += self.draft_ms + self.draft_per_node_ms * frontier + (self.draft_first_ms if level == 0 else 0.0)
            frontier *= width
        verify = self.curve.ms(tree_node_count(branching) + 1) + self.verify_extra_ms
        return dict(verify=verify, draft=max(draft, 0.0), overhead=self.overhead_ms,
                    total=verify + max(draft, 0.0) + self.overhead_ms)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["curve"] = self.curve.to_dict()
        return d


@contextmanager
def _timed_calls(target: Transformer, drafter: Drafter) -> Iterator[dict[str, list]]:
    """Record (new tokens, thread ms) of every target forward and (level, frontier, thread ms) of every drafter call."""
    record: dict[str, list] = {"target": [], "draft": []}
    start: list[float] = []

    def pre(module, args, kwargs):
        start.append(time.thread_time())

    def post(module, args, kwargs, out):
        record["target"].append((args[0].shape[1], 1000 * (time.thread_time() - start.pop())))

    original = drafter.next_logits

    def timed(context, tokens, parents, frontier):
        t = time.thread_time()
        out = original(context, tokens, parents, frontier)
        depth = 0
        node = frontier[0]
        while parents[node] >= 0:
            node, depth = parents[node], depth + 1
        record["draft"].append((depth, len(frontier), 1000 * (time.thread_time() - t)))
        return out

    hooks = [target.register_forward_pre_hook(pre, with_kwargs=True),
             target.register_forward_hook(post, with_kwargs=True)]
    drafter.next_logits = timed
    try:
        yield record
    finally:
        for h in hooks:
            h.remove()
        del drafter.next_logits  # back to the class method


def _fit(rows: list[tuple[float, ...]], ys: list[float]) -> list[float]:
    """Least squares coefficients (non-negative where the data allow: a negative one is dropped to 0)."""
    x, y = np.array(rows, dtype=np.float64), np.array(ys, dtype=np.float64)
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    while (coef < 0).any() and x.shape[1] > 1:
        keep = coef >= 0
        sub = np.linalg.lstsq(x[:, keep], y, rcond=None)[0]
        coef = np.zeros_like(coef)
        coef[keep] = sub
        if (sub >= 0).all():
            break
    return coef.tolist()


@torch.inference_mode()
def measure_costs(
    target: Transformer,
    drafter: Drafter,
    prompts: Sequence[Sequence[int]],
    curve: CostCurve,
    new_tokens: int = 48,
    shapes: Sequence[Sequence[int]] = ((1, 1, 1, 1), (4, 2, 2, 1), (2, 2, 2, 2, 1, 1)),
) -> StepCosts:
    """Fit StepCosts from short greedy generations with `shapes` (one torch thread, thread CPU time)."""
    drafts: list[tuple[int, int, float]] = []
    verify_extra: list[float] = []
    overhead: list[float] = []
    plain: list[float] = []
    with one_thread():
        tree_speculative_generate(target, drafter, list(prompts[0])[:32], 8, branching=list(shapes[0]))  # warm-up
        for prompt in prompts:
            ids = torch.tensor([list(prompt)], device=target.device)
            t = time.thread_time()
            out = generate(target, ids, new_tokens)
            plain.append(1000 * (time.thread_time() - t) / out.shape[1])
            for shape in shapes:
                with _timed_calls(target, drafter) as rec:
                    t = time.thread_time()
                    tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(shape))
                    total = 1000 * (time.thread_time() - t)
                prefill_ms, *verifies = rec["target"]
                verify_extra += [ms - curve.ms(n) for n, ms in verifies]
                drafts += rec["draft"]
                overhead.append((total - prefill_ms[1] - sum(ms for _, ms in verifies) - sum(ms for *_, ms in rec["draft"]))
                                / len(verifies))
    a, b, c = _fit([(1.0, width, float(depth == 0)) for depth, width, _ in drafts], [ms for *_, ms in drafts])
    return StepCosts(curve, a, b, c, statistics.median(verify_extra), statistics.median(overhead),
                     statistics.median(plain))


@torch.inference_mode()
def draft_call_breakdown(
    target: Transformer, drafter: Drafter, prompts: Sequence[Sequence[int]], new_tokens: int = 48,
    branching: Sequence[int] = (1, 1, 1, 1),
) -> dict[str, float]:
    """Where a feature drafter's call goes: thread ms per `next_logits` call in greedy tree decoding, split into
    the head's forward (its decoder layer with its KV cache), `logits` (final norm + LM head over the draft
    vocabulary) and the rest (Python bookkeeping: paths, masks, feature rows). One torch thread."""
    spent = {"head": 0.0, "logits": 0.0, "total": 0.0}
    starts: list[float] = []
    hooks = [drafter.head.register_forward_pre_hook(lambda m, a: starts.append(time.thread_time())),
             drafter.head.register_forward_hook(lambda m, a, o: spent.__setitem__(
                 "head", spent["head"] + time.thread_time() - starts.pop()))]
    original_logits, original_next = drafter.logits, drafter.next_logits
    calls = [0]

    def logits(hidden):
        t = time.thread_time()
        out = original_logits(hidden)
        spent["logits"] += time.thread_time() - t
        return out

    def next_logits(context, tokens, parents, frontier):
        t = time.thread_time()
        out = original_next(context, tokens, parents, frontier)
        spent["total"] += time.thread_time() - t
        calls[0] += 1
        return out

    drafter.logits, drafter.next_logits = logits, next_logits
    try:
        with one_thread():
            for prompt in prompts:
                tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(branching))
    finally:
        for h in hooks:
            h.remove()
        del drafter.logits, drafter.next_logits
    ms = {k: 1000 * v / calls[0] for k, v in spent.items()}
    return dict(calls=calls[0], total_ms=ms["total"], head_ms=ms["head"], logits_ms=ms["logits"],
                other_ms=ms["total"] - ms["head"] - ms["logits"])


# ---------------------------------------------------------------- the search

def branching_lists(max_depth: int, max_width: int, max_nodes: int) -> list[list[int]]:
    """Every per-level branching list with widths 1..max_width, 1..max_depth levels and <= max_nodes nodes."""
    out: list[list[int]] = []

    def grow(prefix: list[int], nodes: int, frontier: int) -> None:
        for w in range(1, max_width + 1):
            if nodes + frontier * w > max_nodes:
                break
            shape = prefix + [w]
            out.append(shape)
            if len(shape) < max_depth:
                grow(shape, nodes + frontier * w, frontier * w)

    grow([], 0, 1)
    return out


def rank_shapes(
    profile: RankProfile, costs: StepCosts, max_width: int = 4, max_nodes: int = 63,
    include: Sequence[Sequence[int]] = (),
) -> list[dict]:
    """Every branching list (plus `include`) with its predicted tokens per pass, step ms and ms per token,
    fastest first."""
    shapes = branching_lists(profile.depth, min(max_width, profile.max_rank), max_nodes)
    shapes += [list(s) for s in include if list(s) not in shapes and len(s) <= profile.depth]
    reach = profile.reach_many(shapes)
    rows = []
    for shape, r in zip(shapes, reach):
        tokens = 1.0 + float(r.sum())
        step = costs.step_ms(shape)
        rows.append(dict(branching=shape, nodes=tree_node_count(shape), tokens_per_pass=tokens, **{f"{k}_ms": v for k, v in step.items()},
                         ms_per_token=step["total"] / tokens, speedup=costs.plain_ms_per_token / (step["total"] / tokens)))
    rows.sort(key=lambda row: row["ms_per_token"])
    return rows


def _shape_text(branching: Sequence[int]) -> str:
    return f"chain k={len(branching)}" if all(w == 1 for w in branching) else f"tree {list(branching)}"


@torch.inference_mode()
def run_shape(target: Transformer, drafter: Drafter, prompt: Sequence[int], new_tokens: int, branching: Sequence[int]):
    """One greedy run with `branching`: all-ones shapes through the chain decoder (as the benchmark runs them)."""
    if all(w == 1 for w in branching):
        return speculative_generate(target, drafter, prompt, new_tokens, k=len(branching))
    return tree_speculative_generate(target, drafter, prompt, new_tokens, branching=list(branching))


def interleaved_runs(
    target: Transformer, runs: Sequence[tuple[str, Callable[[list[int]], SpecOutput]]],
    prompts: Sequence[Sequence[int]], new_tokens: int, rounds: int = 2,
) -> list[dict]:
    """Plain greedy and each named run(prompt) -> SpecOutput on every prompt, interleaved, `rounds` times (the
    runs' order reversed every other round), one thread, thread CPU time -> per run {ms_per_token, tau, speedup,
    plain_ms_per_token}. Raises when a run's tokens differ from plain greedy."""
    totals = [[0.0, 0, 0] for _ in range(len(runs) + 1)]  # ms, tokens, target calls; the last: plain
    order = list(enumerate(runs))
    with one_thread():
        for r in range(rounds):
            for prompt in prompts:
                t = time.thread_time()
                out = generate(target, torch.tensor([list(prompt)], device=target.device), new_tokens)[0].tolist()
                totals[-1][0] += 1000 * (time.thread_time() - t)
                totals[-1][1] += len(out)
                for i, (label, run) in (order if r % 2 == 0 else order[::-1]):
                    t = time.thread_time()
                    spec = run(list(prompt))
                    totals[i][0] += 1000 * (time.thread_time() - t)
                    totals[i][1] += len(spec.tokens)
                    totals[i][2] += spec.target_calls
                    if spec.tokens != out:
                        raise AssertionError(f"{label}: output differs from plain greedy")
    plain = totals[-1][0] / totals[-1][1]
    return [dict(ms_per_token=ms / n, tau=n / calls, speedup=plain / (ms / n), plain_ms_per_token=plain)
            for ms, n, calls in totals[:-1]]


def validate(
    target: Transformer, drafters: dict[str, Drafter], candidates: list[tuple[str, list[int]]],
    prompts: Sequence[Sequence[int]], new_tokens: int, rounds: int = 2,
) -> list[dict]:
    """Each (drafter key, branching) against plain greedy (`interleaved_runs`); thread ms per token."""
    runs = [(f"{key} {shape}", lambda p, key=key, shape=shape: run_shape(target, drafters[key], p, new_tokens, shape))
            for key, shape in candidates]
    measured = interleaved_runs(target, runs, prompts, new_tokens, rounds)
    return [dict(vocab=key, branching=shape, **m) for (key, shape), m in zip(candidates, measured)]


def tune_confidence_stop(
    target: Transformer, drafter: Drafter, prompts: Sequence[Sequence[int]], new_tokens: int,
    thetas: Sequence[float] = THETAS, rounds: int = 2, margin: float = MARGIN,
) -> dict:
    """Confidence-stopped chains (k = the benchmark's, min_path_prob = each θ) against plain greedy
    (`interleaved_runs`) -> {k, min_path_prob, measured}: the fastest θ, or the benchmark's default θ when the
    fastest beats it by less than `margin`."""
    from .bench import CONFIDENCE_STOP

    k, default = CONFIDENCE_STOP["k"], CONFIDENCE_STOP["min_path_prob"]
    thetas = sorted({*thetas, default})
    runs = [(f"confidence stop θ={theta}",
             lambda p, theta=theta: speculative_generate(target, drafter, p, new_tokens, k=k, min_path_prob=theta))
            for theta in thetas]
    measured = [dict(min_path_prob=theta, **m)
                for theta, m in zip(thetas, interleaved_runs(target, runs, prompts, new_tokens, rounds))]
    return dict(k=k, min_path_prob=choose_theta(measured, default, margin), measured=measured)


def choose_theta(measured: list[dict], default: float, margin: float = MARGIN) -> float:
    """The fastest measured θ, unless it beats the `default` θ's run by less than `margin` (then the default)."""
    best = min(measured, key=lambda m: m["ms_per_token"])
    kept = next(m for m in measured if m["min_path_prob"] == default)
    return best["min_path_prob"] if best["ms_per_token"] < (1 - margin) * kept["ms_per_token"] else default


def choose(measured: list[dict], fixed: Sequence[Sequence[int]], margin: float = MARGIN) -> dict:
    """The validation row to save: the fastest, unless it is not a benchmark fixed shape and beats the fastest
    fixed shape (full vocabulary) by less than `margin`; then that fixed shape (a run-to-run difference is
    not a better tree)."""
    best = min(measured, key=lambda m: m["ms_per_token"])
    fixed_rows = [m for m in measured if m["vocab"] is None and list(m["branching"]) in [list(s) for s in fixed]]
    if not fixed_rows or best in fixed_rows:
        return best
    best_fixed = min(fixed_rows, key=lambda m: m["ms_per_token"])
    return best if best["ms_per_token"] < (1 - margin) * best_fixed["ms_per_token"] else best_fixed


# ---------------------------------------------------------------- drafters by name

def make_drafter(name: str, target: Transformer, draft: Transformer | str | None = "tiny-qwen3-draft",
                 heads_dir: str | Path = MODELS_DIR / "heads", draft_vocab: torch.Tensor | None = None) -> Drafter:
    """The drafter called `name` (one of DRAFTERS) for `target`; raises FileNotFoundError / ValueError when
    its model or head is missing or does not fit the target."""
    if name == "small-model":
        if draft is None:
            raise FileNotFoundError("no small draft model")
        model = load_model(draft) if isinstance(draft, (str, Path)) else draft
        if model.cfg.vocab_size != target.cfg.vocab_size:
            raise ValueError(f"the small draft's vocabulary ({model.cfg.vocab_size}) != the target's")
        return ModelDrafter(model)
    if name == "int4-self":
        return QuantizedSelfDrafter(target)
    if name in HEAD_FOLDERS:
        return load_head(Path(heads_dir) / HEAD_FOLDERS[name], target, draft_vocab)
    raise ValueError(f"unknown drafter {name!r}; choose from {DRAFTERS}")


def load_tuned(name: str, folder: str | Path = TUNED_DIR) -> dict | None:
    """The saved tuning of drafter `name` (models/tuned/<name>.json), or None."""
    path = Path(folder) / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def load_profile(name: str = "small-model", folder: str | Path = TUNED_DIR) -> RankProfile | None:
    """The rank profile saved with drafter `name`'s tuning (default: the shipped small draft's), or None."""
    tuned = load_tuned(name, folder)
    return None if tuned is None else RankProfile.from_dict(tuned["profile"])


def tuned_drafter(name: str, target: Transformer, draft: Transformer | str | None = "tiny-qwen3-draft",
                  heads_dir: str | Path = MODELS_DIR / "heads", folder: str | Path = TUNED_DIR,
                  model_name: str = "tiny-qwen3") -> tuple[Drafter, list[int]] | None:
    """(drafter with its tuned draft vocabulary, tuned branching) from models/tuned/<name>.json; None when
    there is no tuning for this drafter and target."""
    tuned = load_tuned(name, folder)
    if tuned is None or tuned.get("target") != model_name:
        return None
    vocab = None
    if tuned.get("draft_vocab"):
        order = json.loads((Path(folder) / f"token_frequency-{Path(model_name).name}.json").read_text())["order"]
        vocab = torch.tensor(order[:tuned["draft_vocab"]], device="cpu")
    return make_drafter(name, target, draft, heads_dir, vocab), list(tuned["branching"])


# ---------------------------------------------------------------- the command

def tune_drafter(
    name: str, target: Transformer, tokenizer, curve: CostCurve, model_name: str, args: argparse.Namespace,
) -> dict:
    """Profile, cost, search and (optionally) validate one drafter -> the JSON dict that is saved."""
    t0 = time.perf_counter()
    vocab_sizes = [n for n in args.vocab if 0 < n < target.cfg.vocab_size] if name in HEAD_FOLDERS else []
    order = token_order(model_name, tokenizer, target.cfg.vocab_size) if vocab_sizes else []
    subsets = {n: torch.tensor(order[:n], device="cpu") for n in vocab_sizes}
    drafter = make_drafter(name, target, args.draft, args.heads)
    every = held_out_prompts(tokenizer, args.prompts + args.validate_prompts)
    prompts, cost_prompts = every[:args.prompts], every[args.prompts:] or every[:2]  # disjoint files
    with one_thread():
        profiles = measure_rank_profile(target, drafter, prompts, args.new_tokens, args.depth, args.max_rank, name, subsets)
    print(profiles[None].describe())
    drafters = {None: drafter}
    for n in vocab_sizes:
        drafters[n] = make_drafter(name, target, args.draft, args.heads, subsets[n])
    results = []
    for key, d in drafters.items():
        costs = measure_costs(target, d, cost_prompts[:2], curve, shapes=_cost_shapes(profiles[key].depth))
        rows = rank_shapes(profiles[key], costs, args.max_width, args.max_nodes, FIXED_SHAPES.get(name, ()))
        results.append((key, costs, rows))
        label = "full vocabulary" if key is None else f"draft vocabulary {key}"
        print(f"\n{name}, {label}: draft {costs.draft_ms:.3f} + {costs.draft_per_node_ms:.3f}·frontier ms per level "
              f"(+{costs.draft_first_ms:.3f} on level 1), verify = curve + {costs.verify_extra_ms:.3f} ms, overhead "
              f"{costs.overhead_ms:.3f} ms/step, plain {costs.plain_ms_per_token:.3f} ms/token")
        print(f"  {'shape':24s} {'nodes':>5s} {'tokens/pass':>11s} {'verify':>7s} {'draft':>6s} {'ms/token':>8s} {'speedup':>7s}")
        shown = rows[:args.top] + [r for r in rows if r["branching"] in FIXED_SHAPES.get(name, ()) and r not in rows[:args.top]]
        for r in shown:
            fixed = "  (benchmark's fixed shape)" if r["branching"] in FIXED_SHAPES.get(name, ()) else ""
            print(f"  {_shape_text(r['branching']):24s} {r['nodes']:5d} {r['tokens_per_pass']:11.2f} {r['verify_ms']:7.2f} "
                  f"{r['draft_ms']:6.2f} {r['ms_per_token']:8.3f} {r['speedup']:6.2f}x{fixed}")
    best_key, best_costs, best_rows = min(results, key=lambda kr: kr[2][0]["ms_per_token"])
    chosen = dict(vocab=best_key, branching=best_rows[0]["branching"])
    measured: list[dict] = []
    if args.validate_prompts:
        candidates: list[tuple[int | None, list[int]]] = []
        for key, _, rows in results:
            candidates += [(key, r["branching"]) for r in rows[:args.validate_top]]
        candidates += [(None, list(s)) for s in FIXED_SHAPES.get(name, []) + ALSO_VALIDATED.get(name, [])
                       if len(s) <= profiles[None].depth]
        candidates = list(dict.fromkeys((k, tuple(s)) for k, s in candidates))
        measured = validate(target, drafters, [(k, list(s)) for k, s in candidates], cost_prompts, args.validate_tokens)
        print(f"\nvalidation on {len(cost_prompts)} other held-out prompts x {args.validate_tokens} tokens (thread time, "
              f"1 thread, all identical to plain greedy):")
        for m in sorted(measured, key=lambda m: m["ms_per_token"]):
            label = "full" if m["vocab"] is None else m["vocab"]
            print(f"  {_shape_text(m['branching']):24s} vocab {str(label):>5s}: tau {m['tau']:.2f}, "
                  f"{m['ms_per_token']:.3f} ms/token, {m['speedup']:.2f}x plain")
        best = choose(measured, FIXED_SHAPES.get(name, ()))
        chosen = dict(vocab=best["vocab"], branching=best["branching"])
    confidence = None
    if args.validate_prompts and name in CONFIDENCE_DRAFTERS:
        confidence = tune_confidence_stop(target, drafters[chosen["vocab"]], cost_prompts, args.validate_tokens)
        print(f"\nconfidence stop (chains up to k = {confidence['k']}, draft vocabulary {chosen['vocab'] or 'full'}):")
        for m in confidence["measured"]:
            print(f"  θ = {m['min_path_prob']:.1f}: tau {m['tau']:.2f}, {m['ms_per_token']:.3f} ms/token, "
                  f"{m['speedup']:.2f}x plain")
        print(f"  saved θ = {confidence['min_path_prob']}")
    key, costs, rows = next(r for r in results if r[0] == chosen["vocab"])
    row = next(r for r in rows if r["branching"] == chosen["branching"])
    profile = profiles[key]
    return dict(
        drafter=name, target=model_name, form="chain" if all(w == 1 for w in row["branching"]) else "tree",
        branching=row["branching"], k=len(row["branching"]) if all(w == 1 for w in row["branching"]) else None,
        draft_vocab=key, predicted_tau=row["tokens_per_pass"], predicted_ms_per_token=row["ms_per_token"],
        predicted_speedup=row["speedup"], measured=measured, confidence_stop=confidence,
        top=[dict(vocab=k, **{x: r[x] for x in ("branching", "tokens_per_pass", "ms_per_token", "speedup")})
             for k, _, rs in results for r in rs[:args.top]],
        profile=profile.to_dict(), profile_table=profile.table(), costs={k: v for k, v in costs.to_dict().items() if k != "curve"},
        cost_curve=curve.to_dict(), hardware=hardware_name(), torch_version=torch.__version__,
        seconds=time.perf_counter() - t0, command="python -m tree_spec.tune " + " ".join(sys.argv[1:]),
    )


def _cost_shapes(depth: int) -> list[list[int]]:
    """Shapes whose runs fit the draft-cost line: a chain, a wide first level, a wide deep tree."""
    return [[1] * min(4, depth), [4, 2, 2, 1][:depth], [2, 2, 2, 2, 1, 1][:depth]]


def main(argv: Sequence[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drafter", nargs="+", default=list(DRAFTERS), choices=DRAFTERS)
    p.add_argument("--target", default="tiny-qwen3")
    p.add_argument("--draft", default="tiny-qwen3-draft")
    p.add_argument("--heads", default=str(MODELS_DIR / "heads"))
    p.add_argument("--prompts", type=int, default=16, help="held-out prompts for the profile")
    p.add_argument("--new-tokens", type=int, default=64, help="positions per prompt in the profile")
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--max-rank", type=int, default=8)
    p.add_argument("--max-width", type=int, default=4)
    p.add_argument("--max-nodes", type=int, default=63)
    p.add_argument("--vocab", type=int, nargs="*", default=[2048, 1024],
                   help="reduced draft vocabularies to try for head drafters (0 or none: full only)")
    p.add_argument("--validate-prompts", type=int, default=4, help="0: save the best predicted shape unvalidated")
    p.add_argument("--validate-tokens", type=int, default=96)
    p.add_argument("--validate-top", type=int, default=3)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--curve", default=None, help="cost-curve JSON (default: measure it now, in this process)")
    p.add_argument("--out", default=str(TUNED_DIR))
    p.add_argument("--breakdown", action="store_true",
                   help="only print where each head drafter's call time goes, full vs reduced vocabularies")
    args = p.parse_args(argv)
    target = load_model(args.target)
    tokenizer = load_tokenizer(resolve_model_path(args.target))
    model_name = Path(args.target).name
    if args.breakdown:
        prompts = held_out_prompts(tokenizer, 4)
        order = token_order(model_name, tokenizer, target.cfg.vocab_size)
        for name in [n for n in args.drafter if n in HEAD_FOLDERS]:
            for n in [None, *args.vocab]:
                for rep in range(2):  # the first run warms up
                    vocab = torch.tensor(order[:n], device="cpu") if n else None
                    b = draft_call_breakdown(target, make_drafter(name, target, args.draft, args.heads, vocab), prompts)
                    if rep:
                        print(f"{name}, draft vocabulary {n or 'full'}: {b['total_ms']:.3f} ms per call = head forward "
                              f"{b['head_ms']:.3f} + final norm and LM head {b['logits_ms']:.3f} + rest {b['other_ms']:.3f} "
                              f"({b['calls']} calls, thread time, 1 thread)")
        return []
    if args.curve:
        curve = CostCurve.from_json(args.curve)
    else:
        curve = measure_target_costs(target, new_tokens=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64), repeats=7,
                                     tree_shaped=True, model_name=model_name)
    print(curve.summary())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for name in args.drafter:
        try:
            result = tune_drafter(name, target, tokenizer, curve, model_name, args)
        except (FileNotFoundError, ValueError) as err:
            print(f"{name}: skipped ({err})")
            continue
        path = out / f"{name}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name}: {_shape_text(result['branching'])}, draft vocabulary {result['draft_vocab'] or 'full'}, "
              f"predicted tau {result['predicted_tau']:.2f}, {result['predicted_ms_per_token']:.3f} ms/token "
              f"({result['predicted_speedup']:.2f}x plain) -> {path}\n")
        saved.append(result)
    return saved


if __name__ == "__main__":
    main()
