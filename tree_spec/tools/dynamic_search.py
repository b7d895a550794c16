"""EAGLE-2's settings for the hardware: (depth, width, total_tokens) scored on the measured cost curve, then the
best validated by real runs against plain greedy, as `search` does for fixed shapes.

Profile (`measure_dynamic_profile`): along the target's greedy continuation of held-out prompts, at every position
the drafter expands the whole EAGLE-2 candidate tree (`core.growth.expand_candidates`, depth D, width w). A tree
with total_tokens N and depth d <= D keeps the first N of the candidates of levels <= d in `rerank_order`, so it
accepts depth j when the target's own token at depth j is a candidate ranked within N there. The profile keeps,
per position and depth cap d, the ranks of the target's path nodes (increasing: a parent ranks before its child),
and `DynamicProfile.tokens_per_pass` replays the decoder on the measured text: a pass at position t accepts a(t)
tokens and the next starts at t + a(t) + 1, as `RankProfile` does for branching lists.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mini_llm import Transformer

from ..analysis.ranks import start_walk
from ..analysis.tuned import FIXED_DYNAMIC, dynamic_setting
from ..core.growth import expand_candidates, rerank_order
from ..decoding.dynamic import dynamic_tree_speculative_generate
from ..decoding.loop import target_forward
from ..drafters.base import Drafter
from .search import FINALISTS, THETAS, fastest_unless_close, finalist_indices, interleaved_runs, print_runs
from .step_costs import StepCosts, measure_costs


@dataclass
class DynamicProfile:
    """ranks[p][t][d - 1]: the ranks (1-based, among the candidates of levels <= d) of the target's path nodes at
    depths 1, 2, ... of position t of prompt p, up to the first depth the expansion missed; width w, depth D."""

    width: int
    depth: int
    ranks: list[list[list[list[int]]]]

    def tokens_per_pass(self, depth: int, total_tokens: int) -> float:
        """Mean tokens per verify pass (the target's own included) of a decoder with this depth and total_tokens,
        walking each prompt's measured positions as a real run does."""
        tokens = passes = 0
        for positions in self.ranks:
            t = 0
            while t < len(positions):
                accepted = sum(1 for r in positions[t][depth - 1] if r <= total_tokens)
                tokens, passes, t = tokens + accepted + 1, passes + 1, t + accepted + 1
        return tokens / passes


@torch.inference_mode()
def measure_dynamic_profile(
    target: Transformer, drafter: Drafter, prompts: Sequence[Sequence[int]], new_tokens: int, depth: int, width: int,
) -> DynamicProfile:
    """The DynamicProfile of `drafter` with expansion `width` to `depth` levels, at the first `new_tokens`
    positions of each prompt's greedy continuation (one target decode step and `depth` drafter calls each)."""
    device = target.device
    ranks = []
    for prompt in prompts:
        prompt, reference, cache = start_walk(target, drafter, prompt, new_tokens, depth)
        fed, here = prompt, []
        for t in range(new_tokens):
            _, feats = target_forward(target, drafter, torch.tensor([fed], device=device), cache)
            if feats is not None:
                drafter.observe(feats)
            tokens, parents, score, depth_of, _ = expand_candidates(drafter, prompt + reference[:t], reference[t],
                                                                    depth, width)
            here.append(_path_ranks(tokens, parents, score, depth_of, reference[t + 1:t + 1 + depth], depth))
            fed = [reference[t]]
        ranks.append(here)
    return DynamicProfile(width, depth, ranks)


def _path_ranks(tokens: list[int], parents: list[int], score: list[float], depth_of: list[int], path: list[int],
                depth: int) -> list[list[int]]:
    """Per depth cap d = 1..depth: the ranks among the candidates of levels <= d of the candidates on `path`
    (the target's tokens below the root), up to the first one the expansion did not produce."""
    child = {(p, t): i for i, (p, t) in enumerate(zip(parents, tokens)) if i}
    nodes, node = [], 0
    for token in path:
        node = child.get((node, token))
        if node is None:
            break
        nodes.append(node)
    order = rerank_order(torch.tensor(score[1:], dtype=torch.float64), torch.tensor(depth_of[1:])).tolist()
    out = []
    for cap in range(1, depth + 1):
        rank = {c + 1: r for r, c in enumerate(c for c in order if depth_of[c + 1] <= cap)}
        out.append([rank[n] + 1 for n in nodes if depth_of[n] <= cap])
    return out


def dynamic_step_ms(costs: StepCosts, depth: int, width: int, total_tokens: int) -> float:
    """ms of one EAGLE-2 step: `depth` drafter calls (the first over the root, the others over `width` nodes),
    a verify over total_tokens + 1 nodes, the overhead."""
    draft = sum(costs.draft_ms + costs.draft_per_node_ms * (1 if level == 0 else width) for level in range(depth))
    return (draft + costs.draft_first_ms + costs.curve.ms(total_tokens + 1) + costs.verify_extra_ms
            + costs.overhead_ms)


def rank_dynamic(profiles: Sequence[DynamicProfile], costs: StepCosts, max_nodes: int = 63) -> list[dict]:
    """Every (depth, width, total_tokens) the profiles cover with its predicted tokens per pass and ms per token,
    fastest first."""
    rows = []
    for profile in profiles:
        for depth in range(1, profile.depth + 1):
            candidates = profile.width + (depth - 1) * profile.width ** 2
            for total in range(1, min(max_nodes, candidates) + 1):
                tokens = profile.tokens_per_pass(depth, total)
                ms = dynamic_step_ms(costs, depth, profile.width, total) / tokens
                rows.append(dict(depth=depth, width=profile.width, total_tokens=total, tokens_per_pass=tokens,
                                 ms_per_token=ms, speedup=costs.plain_ms_per_token / ms))
    rows.sort(key=lambda r: r["ms_per_token"])
    return rows


def dynamic_candidates(ranked: Sequence[dict], top_depths: int) -> list[tuple[int | None, dict]]:
    """The settings worth validating, from `rank_dynamic`'s rows (each with its "vocab"), fastest first: at each of
    the `top_depths` depths whose best prediction is fastest, the best predicted setting of every width and draft
    vocabulary -> [(vocab, {depth, width, total_tokens})]. A narrow tree and a wide one of one depth, or a full
    vocabulary and a reduced one, differ more than the predictions' noise: all of them are measured."""
    best: dict[int, dict[tuple, dict]] = {}  # depth -> (width, vocab) -> its fastest row, depths in order of first sight
    for r in sorted(ranked, key=lambda r: r["ms_per_token"]):
        best.setdefault(r["depth"], {}).setdefault((r["width"], r["vocab"]), r)
    return [(r["vocab"], dynamic_setting(r)) for rows in list(best.values())[:top_depths] for r in rows.values()]


def validate_dynamic(target: Transformer, drafters: dict, candidates: list[tuple[int | None, dict]],
                     prompts: Sequence[Sequence[int]], new_tokens: int, rounds: int = 2) -> list[dict]:
    """Each (drafter key, {depth, width, total_tokens}) against plain greedy (`search.interleaved_runs`)."""
    runs = [(f"{key} {setting}", lambda p, key=key, setting=setting: dynamic_tree_speculative_generate(
        target, drafters[key], p, new_tokens, **setting)) for key, setting in candidates]
    measured = interleaved_runs(target, runs, prompts, new_tokens, rounds)
    return [dict(vocab=key, **setting, **m) for (key, setting), m in zip(candidates, measured)]


def dynamic_text(setting: dict) -> str:
    """"dynamic tree (depth 6, width 4, 24 tokens)", or with a depth stop "dynamic tree (depth<=8, width 2, 8 tokens,
    stops below frontier path probability 0.3)"."""
    theta = setting.get("min_path_prob")
    depth = f"depth<={setting['depth']}" if theta else f"depth {setting['depth']}"
    stop = f", stops below frontier path probability {theta}" if theta else ""
    return f"dynamic tree ({depth}, width {setting['width']}, {setting['total_tokens']} tokens{stop})"


def stop_bases(measured: Sequence[dict], chosen: dict) -> list[dict]:
    """The settings a depth stop is tried on: `chosen` first, then the fastest validated setting of each other
    width with its draft vocabulary -> [{depth, width, total_tokens}]. A stop trims the levels the draft is unsure
    of, so a narrow deep tree, which no-stop validation ranks behind a wide one, may gain the most from it."""
    bases = {chosen["width"]: dynamic_setting(chosen)}
    for m in sorted(measured, key=lambda m: m["ms_per_token"]):
        if m["vocab"] == chosen["vocab"]:
            bases.setdefault(m["width"], dynamic_setting(m))
    return list(bases.values())


def tune_dynamic_stop(target: Transformer, drafter: Drafter, bases: Sequence[dict], prompts: Sequence[Sequence[int]],
                      new_tokens: int, max_depth: int, thetas: Sequence[float] = THETAS, rounds: int = 2,
                      finalists: int = FINALISTS) -> dict:
    """EAGLE-2's settings `bases` ({depth, width, total_tokens}; the first the one kept without a stop) with
    Dynamic Depth Decoding's stop (`DynamicShape.min_path_prob`): each base under two depth caps (its depth and
    `max_depth`) with every θ of `thetas`, and the first base without a stop, against plain greedy
    (`interleaved_runs`); then the first base without a stop and the `finalists` fastest once more, in a run of
    their own (`search.finalist_indices`) -> {setting, base, measured, confirmed}: `setting` the fastest of that
    second run ({depth, width, total_tokens, min_path_prob}), or the first base without a stop (θ = 0) when the
    fastest beats it by less than `search.MARGIN`; `base` the base it came from. A stop drafts fewer levels when the
    draft is unsure, so it may pay to allow deeper trees when it is sure."""
    tried = [(bases[0], dict(bases[0], min_path_prob=0.0))]
    tried += [(base, dict(base, depth=d, min_path_prob=t))
              for base in bases for d in sorted({base["depth"], max_depth}) for t in thetas]
    runs = [(dynamic_text(s), lambda p, s=s: dynamic_tree_speculative_generate(target, drafter, p, new_tokens, **s))
            for _, s in tried]
    measured = [dict(**s, **m) for (_, s), m in zip(tried, interleaved_runs(target, runs, prompts, new_tokens, rounds))]
    final = finalist_indices(measured, 0, finalists)
    confirmed = [dict(**tried[i][1], **m) for i, m in
                 zip(final, interleaved_runs(target, [runs[i] for i in final], prompts, new_tokens, rounds))]
    pick = fastest_unless_close(confirmed, confirmed[0])
    return dict(setting={k: pick[k] for k in (*FIXED_DYNAMIC, "min_path_prob")},
                base=tried[final[confirmed.index(pick)]][0], measured=measured, confirmed=confirmed)


def tune_dynamic(name: str, target: Transformer, drafters: dict, prompts: Sequence[Sequence[int]],
                 cost_prompts: Sequence[Sequence[int]], curve, args) -> dict:
    """Profile, cost, search and validate EAGLE-2's setting for drafter `name` -> the "dynamic" entry of its
    tuning: depth, width, total_tokens and min_path_prob (0: no stop) as `tune_dynamic_stop` picked them from the
    validated settings (`stop_bases`), draft_vocab (None: full), the predictions (of the picked setting's base,
    without a stop) and the measured rows (`measured`, `confirmed`: the validation and its finalists;
    `stop_measured`, `stop_confirmed`: the stop's sweep and its finalists).

    drafters: {draft vocabulary size or None: drafter}. The fixed setting (`FIXED_DYNAMIC`, full vocabulary) is
    validated too; it and the fastest validated settings are timed again in a run of their own
    (`search.finalist_indices`), and it is kept unless the fastest there beats it by `search.MARGIN`."""
    ranked = []
    for key, drafter in drafters.items():
        costs = measure_costs(target, drafter, cost_prompts[:2], curve, shapes=[[1, 1, 1, 1], [4, 2, 2, 1]])
        profiles = [measure_dynamic_profile(target, drafter, prompts, args.new_tokens, args.depth, w)
                    for w in range(2, args.max_width + 1)]
        ranked += [dict(vocab=key, **r) for r in rank_dynamic(profiles, costs, args.max_nodes)]
    ranked.sort(key=lambda r: r["ms_per_token"])
    candidates = [(vocab, tuple(s.items())) for vocab, s in dynamic_candidates(ranked, args.validate_top)]
    candidates.append((None, tuple(FIXED_DYNAMIC.items())))
    measured = validate_dynamic(target, drafters, [(k, dict(s)) for k, s in dict.fromkeys(candidates)], cost_prompts,
                                args.validate_tokens)
    fixed = next(i for i, m in enumerate(measured) if m["vocab"] is None and dynamic_setting(m) == FIXED_DYNAMIC)
    final = finalist_indices(measured, fixed)
    confirmed = validate_dynamic(target, drafters, [(measured[i]["vocab"], dynamic_setting(measured[i])) for i in final],
                                 cost_prompts, args.validate_tokens)
    chosen = fastest_unless_close(confirmed, confirmed[0])
    for title, rows in (("validation", measured), ("the fixed setting and the fastest again, in a run of their own",
                                                   confirmed)):
        print(f"  {title}:")
        print_runs(rows, lambda m: f"  {dynamic_text(m)} vocab {m['vocab'] or 'full'}")
    stop = tune_dynamic_stop(target, drafters[chosen["vocab"]], stop_bases(measured, chosen), cost_prompts,
                             args.validate_tokens, args.depth)
    for title, rows in (("with a depth stop", stop["measured"]), ("the fastest again, in a run of their own",
                                                                   stop["confirmed"])):
        print(f"  {title} (vocab {chosen['vocab'] or 'full'}):")
        print_runs(rows, lambda m: f"  {dynamic_text(m)}")
    predicted = next((r for r in ranked if r["vocab"] == chosen["vocab"] and dynamic_setting(r) == stop["base"]), None)
    return dict(stop["setting"], draft_vocab=chosen["vocab"], predicted_tau=predicted and predicted["tokens_per_pass"],
                predicted_ms_per_token=predicted and predicted["ms_per_token"], measured=measured, confirmed=confirmed,
                stop_measured=stop["measured"], stop_confirmed=stop["confirmed"], top=ranked[:args.top])
