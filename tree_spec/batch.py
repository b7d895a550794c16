"""Batched chain speculative decoding: B prompts of any lengths, rows that accept different numbers of tokens.

Each step, for all unfinished rows at once: (1) the drafter proposes up to k tokens per row, (2) ONE
target forward verifies [root, d_1..d_k] of every row, (3) each row accepts its own prefix (greedy
comparison, or the lossless `verify_chain`), (4) each row's cache rolls back to root + accepted
(`cache.truncate(per-row lengths)`), (5) rows that hit EOS or their budget leave the batch
(`cache.select_rows`) while the others go on. The KV cache has a length per row (mini_llm.KVCache).
"""
from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from mini_llm import Transformer, logits_to_probs, sample_next
from mini_llm.batch import _token_lists, extend_rows, generate_batch

from .costs import TimeSplit, clock_name, hardware_name, time_split
from .drafters import Drafter, ModelDrafter, _common_prefix
from .output import SpecOutput
from .sampling import verify_chain
from .tree import build_draft_tree


class BatchModelDrafter:
    """A causal LM (separate small model, or the quantized self) drafting a chain for every row at once.

    It keeps its own KV cache with a length per row. Per step: one ragged forward catches each row up
    on the tokens committed since its last proposal (the prompt at the first step; then 1 or 2 tokens),
    then k - 1 forwards of [B, 1]: k draft forwards for the whole batch.
    """

    def __init__(self, model: Transformer) -> None:
        self.model = model
        self.calls = 0
        self.cache = None
        self.seqs: list[list[int]] = []  # per row: the tokens whose K/V are in self.cache

    def __repr__(self) -> str:
        return f"BatchModelDrafter({self.model.num_parameters():,} parameters)"

    @property
    def vocab_size(self) -> int:
        return self.model.cfg.vocab_size

    @property
    def device(self) -> torch.device:
        return self.model.device

    def start(self, batch_size: int, max_len: int) -> None:
        self.cache = self.model.new_cache(batch_size=batch_size, max_len=max_len)
        self.seqs = [[] for _ in range(batch_size)]

    def select_rows(self, rows: Sequence[int]) -> None:
        self.cache.select_rows(rows)
        self.seqs = [self.seqs[r] for r in rows]

    def propose(
        self, contexts: list[list[int]], k: int, temperature: float, top_k: int | None, top_p: float | None,
        generator: torch.Generator | None,
    ) -> tuple[list[list[int]], torch.Tensor | None]:
        """k draft tokens per row after contexts[b] (whose last token is the root) -> (drafts [B][k],
        draft_probs [B, k, V] the drafts were sampled from, or None when greedy)."""
        keep = [min(_common_prefix(seen, ctx), len(ctx) - 1) for seen, ctx in zip(self.seqs, contexts)]
        self.cache.truncate(keep)                        # drop rejected drafts, keep the committed prefix
        logits = extend_rows(self.model, self.cache, [ctx[n:] for ctx, n in zip(contexts, keep)])  # [B, V]
        drafts, probs = [], []
        for level in range(k):
            if level:
                logits = self.model(token[:, None], cache=self.cache)[:, -1]  # feed the previous draft
            if temperature == 0.0:
                token = logits.argmax(-1)                                      # [B]
            else:
                probs.append(logits_to_probs(logits, temperature, top_k, top_p))
                token = torch.multinomial(probs[-1], 1, generator=generator)[:, 0]
            drafts.append(token)
        self.calls += k
        rows = torch.stack(drafts, 1).tolist()                                 # [B][k]
        self.seqs = [ctx + d[:-1] for ctx, d in zip(contexts, rows)]           # the last draft was never fed
        return rows, torch.stack(probs, 1) if probs else None


class PerRowDrafter:
    """A token-level single-sequence Drafter (n-gram / prompt lookup), one copy per row.

    It runs no forward pass, so there is nothing to batch: each row drafts its chain with
    `build_draft_tree`, exactly as in `speculative_generate`.
    """

    def __init__(self, drafter: Drafter) -> None:
        self.template = drafter
        self.rows: list[Drafter] = []

    def __repr__(self) -> str:
        return f"PerRowDrafter({self.template!r})"

    @property
    def vocab_size(self) -> int:
        return self.template.vocab_size

    @property
    def device(self) -> torch.device:
        return self.template.device

    @property
    def calls(self) -> int:
        return sum(d.calls for d in self.rows)

    def start(self, batch_size: int, max_len: int) -> None:
        self.rows = [copy.deepcopy(self.template) for _ in range(batch_size)]
        for d in self.rows:
            d.reset(max_len)

    def select_rows(self, rows: Sequence[int]) -> None:
        self.rows = [self.rows[r] for r in rows]

    def propose(self, contexts, k, temperature, top_k, top_p, generator):
        trees = [build_draft_tree(d, ctx[:-1], ctx[-1], [1] * k, temperature, top_k, top_p, generator)
                 for d, ctx in zip(self.rows, contexts)]
        drafts = [t.tokens[1:] for t in trees]
        if temperature == 0.0:
            return drafts, None
        return drafts, torch.stack([t.draft_probs[:k] for t in trees])


def as_batch_drafter(drafter: Drafter | Transformer | BatchModelDrafter | PerRowDrafter):
    """A Transformer or ModelDrafter (incl. QuantizedSelfDrafter) -> BatchModelDrafter; a token-level
    Drafter (n-gram) -> PerRowDrafter. Feature-level drafters (EAGLE, Medusa, MTP) are not batched."""
    if isinstance(drafter, (BatchModelDrafter, PerRowDrafter)):
        return drafter
    if isinstance(drafter, Transformer):
        return BatchModelDrafter(drafter)
    if isinstance(drafter, ModelDrafter):
        return BatchModelDrafter(drafter.model)
    if isinstance(drafter, Drafter) and drafter.feature_layers is None:
        return PerRowDrafter(drafter)
    raise TypeError(f"batched drafting supports a small model, the quantized self or n-gram, not {drafter!r}")


@torch.inference_mode()
def batch_speculative_generate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    k: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | None = None,
) -> list[SpecOutput]:
    """Chain speculative decoding of B prompts (token lists of any lengths) at once -> one SpecOutput per row.

    Per step, one draft pass (k draft forwards for a model) and ONE target verify forward for every
    unfinished row; each row accepts its own number of drafts. Greedy row b equals
    `generate(target, prompts[b], max_new_tokens)` (cut after EOS); sampling accepts each row with
    `verify_chain`, so each row follows the target's distribution. A row drafts min(k, tokens it still
    needs - 1); its SpecOutput counts the verify passes and draft forwards it took part in, and
    `seconds` is the whole batch's wall time.
    """
    start_time = time.perf_counter()
    rows = _token_lists(prompts)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    draft = as_batch_drafter(drafter)
    if draft.vocab_size != target.cfg.vocab_size:
        raise ValueError(f"drafter vocabulary ({draft.vocab_size}) != target vocabulary ({target.cfg.vocab_size})")
    max_len = max(map(len, rows)) + max_new_tokens + k + 2
    if max_len - 2 > target.cfg.max_position_embeddings:
        raise ValueError(f"longest prompt + max_new_tokens + k exceeds max_position_embeddings "
                         f"({target.cfg.max_position_embeddings})")
    eos = {eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id or ())
    outs = [SpecOutput() for _ in rows]
    if max_new_tokens == 0:
        return outs
    device = target.device
    cache = target.new_cache(batch_size=len(rows), max_len=max_len)
    draft.start(len(rows), max_len)

    def unfinished(b: int) -> bool:
        return outs[b].tokens[-1] not in eos and len(outs[b].tokens) < max_new_tokens

    # prefill: one target forward over all prompts gives each row its first token (the first root)
    first = sample_next(extend_rows(target, cache, rows), temperature, top_k, top_p, generator).tolist()
    for out, token in zip(outs, first):
        out.target_calls, out.tokens = 1, [token]
    active = list(range(len(rows)))  # outs[] index of each cache row
    while True:
        keep = [i for i, b in enumerate(active) if unfinished(b)]
        if not keep:
            break
        if len(keep) < len(active):  # finished rows leave the batch; the others go on
            cache.select_rows(keep)
            draft.select_rows(keep)
            active = [active[i] for i in keep]
        # 1. draft: row i needs depth[i] <= k drafts (never past its budget); the batch drafts the deepest
        depth = [min(k, max_new_tokens - len(outs[b].tokens) - 1) for b in active]
        n_draft = max(depth)
        contexts = [rows[b] + outs[b].tokens for b in active]
        if n_draft:
            drafts, draft_probs = draft.propose(contexts, n_draft, temperature, top_k, top_p, generator)
        else:  # every row needs exactly one more token: a plain target step
            drafts = [[] for _ in active]
            draft_probs = torch.zeros(len(active), 0, target.cfg.vocab_size, device=device)
        # 2. verify: ONE target forward over [root, d_1..d_n] of every row -> [B, n + 1, V]
        starts = cache.lengths
        logits = target(torch.tensor([[ctx[-1]] + d for ctx, d in zip(contexts, drafts)], device=device), cache=cache)
        # 3. accept per row: the longest agreeing prefix (greedy) or the rejection rule (sampling)
        if temperature == 0.0:
            predicted = logits.argmax(-1)                                                 # [B, n + 1]
            allowed = torch.arange(n_draft, device=device) < torch.tensor(depth, device=device)[:, None]
            agree = (predicted[:, :n_draft] == torch.tensor(drafts, device=device).view(len(active), n_draft)) & allowed
            n_accepted = agree.int().cumprod(-1).sum(-1)                                  # [B]
            next_tokens = predicted.gather(1, n_accepted[:, None])[:, 0].tolist()
            n_accepted = n_accepted.tolist()
        else:
            target_probs = logits_to_probs(logits, temperature, top_k, top_p)             # [B, n + 1, V]
            verdicts = [verify_chain(drafts[i][:d], draft_probs[i, :d].to(device), target_probs[i, :d + 1], generator)
                        for i, d in enumerate(depth)]
            n_accepted, next_tokens = (list(x) for x in zip(*verdicts))
        # 4. roll back: each row keeps its root + accepted drafts
        cache.truncate([s + 1 + n for s, n in zip(starts, n_accepted)])
        # 5. commit, each row up to its first EOS
        for i, b in enumerate(active):
            new = drafts[i][:n_accepted[i]] + [next_tokens[i]]
            stop = next((j for j, t in enumerate(new) if t in eos), len(new) - 1)
            outs[b].record_verify(min(n_accepted[i], stop + 1), depth[i], depth[i])
            outs[b].draft_calls += n_draft
            outs[b].tokens += new[: stop + 1]
    seconds = time.perf_counter() - start_time
    for out in outs:
        out.seconds = seconds
    return outs


@dataclass
class BatchPoint:
    """One batch size of `batch_sweep`: plain and speculative runs over the same prompts, end to end."""

    batch: int
    rows: int              # prompts decoded at this B (the same ones at every B), in batches of `batch`
    plain_tokens: int
    plain_seconds: float
    spec_tokens: int
    spec_seconds: float
    target_calls: int      # speculative verify passes + prefill, summed over rows
    proposed: int          # draft tokens sent to the target, summed over rows
    accepted: int          # of which accepted
    identical: bool        # greedy: every speculative row equals its plain row
    plain_time: TimeSplit | None = None   # where the kept plain run's time went (summed over its batches)
    spec_time: TimeSplit | None = None    # the same for the kept speculative run
    plain_ms_rounds: tuple[float, ...] = ()   # the plain run's total ms in every round (the kept one is the least)
    spec_ms_rounds: tuple[float, ...] = ()

    @property
    def plain_tps(self) -> float:
        return self.plain_tokens / self.plain_seconds

    @property
    def spec_tps(self) -> float:
        return self.spec_tokens / self.spec_seconds

    @property
    def speedup(self) -> float:
        """Speculative tokens/s over plain tokens/s at this batch size."""
        return self.spec_tps / self.plain_tps

    @property
    def tau(self) -> float:
        """Tokens per target call per row, counting the target's own token (and the prefill call)."""
        return self.spec_tokens / self.target_calls

    @property
    def acceptance_ratio(self) -> float:
        """Accepted / proposed draft tokens (vLLM's counter, not the per-position α)."""
        return self.accepted / self.proposed if self.proposed else 0.0


def batch_sweep(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompts: Sequence[Sequence[int]],
    batches: Sequence[int],
    max_new_tokens: int,
    k: int = 4,
    repeats: int = 1,
) -> list[BatchPoint]:
    """`batch_sweeps` for one drafter."""
    return batch_sweeps(target, {"": drafter}, prompts, batches, max_new_tokens, k, repeats)[""]


def batch_sweeps(
    target: Transformer,
    drafters: Mapping[str, Drafter | Transformer],
    prompts: Sequence[Sequence[int]],
    batches: Sequence[int],
    max_new_tokens: int,
    k: int = 4,
    repeats: int = 1,
) -> dict[str, list[BatchPoint]]:
    """Greedy tokens per second of `generate_batch` and of `batch_speculative_generate` with each drafter, at
    each batch size B: tokens generated / time of the calls, prefill included -> {drafter name: [BatchPoint]}.

    Every B decodes the same rows: all the prompts, in consecutive batches of B (the last may be smaller),
    cycled to fill one batch when B > len(prompts). So the rows' content, and with it τ, is the same at
    every B, and the speedup curve shows the batch size alone. The plain run is shared by the drafters. Time is
    the thread's CPU time on a CPU (run torch with one thread: the time other processes run then does not count,
    though they still slow this thread through shared caches), synchronized wall time on CUDA, split into
    prefill, forwards, drafting and the rest (`costs.time_split`). `repeats` rounds each time every B once, plain
    and each drafter in an order that rotates round by round (so a machine that drifts favours none of them);
    each run keeps its fastest round (noise on a shared machine only adds time).
    """
    draft_by_name = {name: as_batch_drafter(d) for name, d in drafters.items()}
    sizes = list(batches)
    best: dict[tuple[str | None, int], tuple[list, TimeSplit]] = {}   # (drafter or None for plain, B) -> fastest
    rounds: dict[tuple[str | None, int], list[float]] = {}            # the same key -> total ms of every round

    def keep(key, result, split):
        rounds.setdefault(key, []).append(split.total_ms)
        if key not in best or split.total_ms < best[key][1].total_ms:
            best[key] = (result, split)

    def run_chunks(chunks, fn, drafter=None):
        results, total = [], TimeSplit()
        for chunk in chunks:
            out, split = time_split(lambda: fn(chunk), target, drafter)
            results += out
            total += split
        return results, total

    runs = [None, *draft_by_name]   # None: plain
    for r in range(repeats):
        for B in sizes:
            rows = [list(prompts[i % len(prompts)]) for i in range(max(B, len(prompts)))]
            chunks = [rows[i:i + B] for i in range(0, len(rows), B)]
            for name in runs[r % len(runs):] + runs[:r % len(runs)]:
                if name is None:
                    keep((None, B), *run_chunks(chunks, lambda c: generate_batch(target, c, max_new_tokens)))
                else:
                    draft = draft_by_name[name]
                    keep((name, B), *run_chunks(
                        chunks, lambda c: batch_speculative_generate(target, draft, c, max_new_tokens, k=k), draft))
    points = {}
    for name in draft_by_name:
        points[name] = []
        for B in sizes:
            (plain, plain_time), (outs, spec_time) = best[(None, B)], best[(name, B)]
            points[name].append(BatchPoint(
                B, len(plain), sum(map(len, plain)), plain_time.total_ms / 1000, sum(len(o.tokens) for o in outs),
                spec_time.total_ms / 1000, sum(o.target_calls for o in outs), sum(o.proposed for o in outs),
                sum(sum(o.accepted_per_call) for o in outs), [o.tokens for o in outs] == plain, plain_time, spec_time,
                tuple(rounds[(None, B)]), tuple(rounds[(name, B)]),
            ))
    return points


def plain_scaling(points: Sequence[BatchPoint]) -> dict[int, float]:
    """Plain `generate_batch` tokens/s at each batch size over its tokens/s at the first (B = 1): how much
    the baseline itself gains from batching (a fair batch baseline gains several times by B = 8)."""
    return {p.batch: p.plain_tps / points[0].plain_tps for p in points}


def crossover(points: Sequence[BatchPoint]) -> int | None:
    """The smallest measured batch size from which every speedup (points in batch order) stays below 1x; None
    if the last one is not. A single dip below 1x followed by a win is timing noise, not a crossover."""
    crossing = None
    for p in points:
        crossing = (crossing or p.batch) if p.speedup < 1 else None
    return crossing


def batch_table(points_by_drafter: dict[str, list[BatchPoint]]) -> str:
    """A markdown table: one row per (drafter, B) with plain and speculative tokens/s and the speedup."""
    lines = ["| drafter | B | plain tok/s | spec tok/s | speedup | τ (tokens/call) | acceptance ratio | identical |",
             "|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for name, points in points_by_drafter.items():
        for p in points:
            lines.append(f"| {name} | {p.batch} | {p.plain_tps:.0f} | {p.spec_tps:.0f} | {p.speedup:.2f}× | "
                         f"{p.tau:.2f} | {p.acceptance_ratio:.2f} | {'yes' if p.identical else 'NO'} |")
        cross = crossover(points)
        lines.append(f"| {name}: measured crossover | {cross if cross else 'none'} | | | | | | |")
    return "\n".join(lines)


def batch_benchmark(
    target_name: str, draft_name: str, batches: Sequence[int], n_prompts: int, new_tokens: int, k: int = 4,
    out_dir: str | None = None, device: torch.device | str = "cpu",
) -> dict:
    """`python -m tree_spec.bench --batch 1,4,16`: `batch_sweep` for every batched drafter (n-gram, the
    separate small model unless draft_name is 'none', the INT4 quantized self) on held-out prompts, every
    model on `device`; prints the table and, with out_dir, writes BENCHMARK_BATCH.md there.
    Returns {drafter: [BatchPoint as dict]}."""
    from pathlib import Path

    from mini_llm import load_model, load_tokenizer

    from .drafters import QuantizedSelfDrafter
    from .ngram import NGramDrafter
    from .prompts import held_out_prompts

    target = load_model(target_name, device=device)
    prompts = held_out_prompts(load_tokenizer(target_name), n=n_prompts)
    drafters: dict[str, Drafter | Transformer] = {"n-gram": NGramDrafter(target.cfg.vocab_size, device=target.device)}
    if draft_name != "none":
        drafters[f"small model ({draft_name})"] = load_model(draft_name, device=device)
    drafters["INT4 quantized self"] = QuantizedSelfDrafter(target)
    runs = batch_sweeps(target, drafters, prompts, batches, new_tokens, k=k)
    clock = clock_name(target.device)
    text = (f"# Batched decoding: plain vs chain speculation (k = {k}), {target_name}\n\n"
            f"{n_prompts} held-out prompts at every batch size B (in batches of B; cycled to fill a batch larger than "
            f"{n_prompts}), {new_tokens} new tokens per row, greedy, "
            f"{hardware_name(target.device)}, {torch.get_num_threads()} torch thread(s), {clock}; tokens/s = "
            f"tokens generated / time of the calls, prefill included. Command: `python -m tree_spec.bench --batch "
            f"{','.join(map(str, batches))} --prompts {n_prompts} --new-tokens {new_tokens} --device {device}`."
            f"\n\n{batch_table(runs)}\n\nPlain `generate_batch` tokens/s over its tokens/s at B = {batches[0]} (one "
            f"plain run per B, shared by the drafters): "
            + ", ".join(f"B = {b}: {r:.2f}×" for b, r in plain_scaling(next(iter(runs.values()))).items()) + "\n")
    print(text)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "BENCHMARK_BATCH.md").write_text(text)
    return {name: [vars(p) | dict(speedup=p.speedup, plain_time=p.plain_time.to_dict(),
                                  spec_time=p.spec_time.to_dict()) for p in points] for name, points in runs.items()}
