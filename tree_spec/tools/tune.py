"""Trees chosen for the hardware: a drafter's rank-acceptance profile, this machine's costs, the best tree.

    python -m tree_spec.tools.tune [--drafter small-model int4-self medusa eagle eagle3 mtp] [--prompts 16]
                               [--new-tokens 64] [--validate-prompts 8]

Every prompt it reads comes from a held-out file the benchmark's prompts do not use (`prompts.tuning_prompts`):
a setting is not chosen on the text the benchmark then measures it on.

1. Rank-acceptance profile (`ranks.measure_rank_profile`): where the target's greedy token sits among the
   drafter's candidates at depths 1..D, position by position along held-out text.
2. Costs (`step_costs.measure_costs`): one target forward over n new tokens (`curve.measure_target_costs`,
   tree-shaped mask, measured in the same process), the drafter's ms per call (= per tree level) fitted as
   a + b·(frontier nodes) + c·[first level], and the rest of a step (Python, the target's hidden states,
   compaction) as a constant per step; all with one torch thread and thread CPU time.
3. Search (`search.rank_shapes`): every per-level branching list (widths <= `max_width`, depth <= D, nodes <=
   `max_nodes`) scored by predicted ms per token.
4. Validation (default on): the best predicted shapes and the benchmark's fixed shapes run for real on other
   held-out prompts (interleaved, twice, thread time); then the benchmark's fixed shape and the `search.FINALISTS`
   fastest others run again in a run of their own (the fastest of many noisy runs is partly the luckiest), and the
   fastest there is saved, unless it beats the fixed shape by less than `search.MARGIN` (then the fixed shape is
   kept: the difference is noise).
   For head drafters the reduced draft vocabularies (`--vocab`, e.g. the 1024 most frequent target tokens,
   EAGLE-3's d2t idea) are candidates too; each one's coverage (the share of the target's greedy tokens on the
   validation prompts inside it, the ceiling on its per-position acceptance) is printed and saved. The small draft
   model keeps its whole vocabulary: its final norm and LM head are about a tenth of its call (`--breakdown`
   prints the split), so fewer LM-head rows would save little time and lose acceptance.
5. Confidence stop (recurrent heads: EAGLE-1, EAGLE-3, MTP; with validation): chains of up to k drafts that stop
   once the draft's path probability falls below θ (`speculative_generate(..., min_path_prob=θ)`) run for every
   k of `search.CONFIDENCE_KS` with every θ of `search.THETAS` on the same prompts, then the default
   (`tuned.CONFIDENCE_STOP`) and the fastest again in a run of their own; the fastest pair there is saved as
   `confidence_stop`, unless it beats the default by less than `search.MARGIN`. The benchmark's "confidence stop"
   rows read it.
6. EAGLE-2's dynamic tree (EAGLE-1 and EAGLE-3 heads; `dynamic_search.tune_dynamic`, alone with --dynamic-only):
   every (depth, width, total_tokens) scored from a profile of the whole candidate expansion and the cost terms;
   at the best predicted depths, the best setting of every width and draft vocabulary runs for real beside the
   benchmark's fixed setting, finalists again apart, and the fixed setting is kept unless beaten by `search.MARGIN`;
   then the depth stop is swept the same way; saved as `dynamic`.

Output: `models/tuned/<drafter>.json` with drafter, form ("chain" or "tree"), branching, k (chains),
draft_vocab (N or null), coverage, predicted_tau, predicted_ms_per_token, the measured validation rows, the profile,
the cost terms and the cost curve. `named_drafters.tuned_drafter(name, target)` rebuilds the saved drafter and its
branching (the benchmark uses it for its "(tuned)" rows).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.load import MODELS_DIR, resolve_model_path

from ..analysis.clocks import hardware_name, one_thread
from ..analysis.curve import CostCurve, measure_target_costs
from ..analysis.prompts import BENCH_NEW_TOKENS, BENCH_PROMPTS, held_out_prompts, tuning_prompts
from ..analysis.ranks import measure_rank_profile
from ..analysis.tuned import TUNED_DIR
from .dynamic_search import dynamic_text, tune_dynamic
from .named_drafters import DRAFTERS, DYNAMIC_DRAFTERS, HEAD_FOLDERS, make_drafter, token_order, vocab_coverage
from .search import (
    ALSO_VALIDATED, CONFIDENCE_DRAFTERS, FIXED_SHAPES, choose, finalist_indices, kept_shape, print_runs, rank_shapes,
    shape_text, tune_confidence_stop, validate,
)
from .step_costs import draft_call_breakdown, measure_costs


def tune_drafter(
    name: str, target: Transformer, tokenizer, curve: CostCurve, model_name: str, args: argparse.Namespace,
) -> dict:
    """Profile, cost, search and (optionally) validate one drafter -> the JSON dict that is saved."""
    t0 = time.perf_counter()
    vocab_sizes = [n for n in args.vocab if 0 < n < target.cfg.vocab_size] if name in HEAD_FOLDERS else []
    order = token_order(model_name, tokenizer, target.cfg.vocab_size) if vocab_sizes else []
    subsets = {n: torch.tensor(order[:n], device="cpu") for n in vocab_sizes}
    drafter = make_drafter(name, target, args.draft, args.heads)
    prompts, cost_prompts = tuning_prompts(tokenizer, args.prompts, args.validate_prompts)  # disjoint files
    with one_thread():
        profiles = measure_rank_profile(target, drafter, prompts, args.new_tokens, args.depth, args.max_rank, name, subsets)
    print(profiles[None].describe())
    coverage = print_coverage(target, cost_prompts, subsets, args.validate_tokens)
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
            print(f"  {shape_text(r['branching']):24s} {r['nodes']:5d} {r['tokens_per_pass']:11.2f} {r['verify_ms']:7.2f} "
                  f"{r['draft_ms']:6.2f} {r['ms_per_token']:8.3f} {r['speedup']:6.2f}x{fixed}")
    best_key, best_costs, best_rows = min(results, key=lambda kr: kr[2][0]["ms_per_token"])
    chosen = dict(vocab=best_key, branching=best_rows[0]["branching"])
    measured: list[dict] = []
    confirmed: list[dict] = []
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
        def label(m: dict) -> str:
            return f"{shape_text(m['branching']):24s} vocab {str(m['vocab'] or 'full'):>5s}"

        print_runs(measured, label)
        fixed = FIXED_SHAPES.get(name, ())
        final = finalist_indices(measured, measured.index(kept_shape(measured, fixed)))
        confirmed = validate(target, drafters, [(measured[i]["vocab"], measured[i]["branching"]) for i in final],
                             cost_prompts, args.validate_tokens)
        print("the kept shape and the fastest others again, in a run of their own:")
        print_runs(confirmed, label)
        best = choose(confirmed, fixed)
        chosen = dict(vocab=best["vocab"], branching=best["branching"])
    confidence = None
    if args.validate_prompts and name in CONFIDENCE_DRAFTERS:
        confidence = tune_confidence_stop(target, drafters[chosen["vocab"]], cost_prompts, args.validate_tokens)
        print(f"\nconfidence stop (chains of up to k drafts, draft vocabulary {chosen['vocab'] or 'full'}):")
        pair = lambda m: f"k = {m['k']:2d}, θ = {m['min_path_prob']:.1f}"  # noqa: E731
        print_runs(confidence["measured"], pair)
        print("the default and the fastest again, in a run of their own:")
        print_runs(confidence["confirmed"], pair)
        print(f"  saved k = {confidence['k']}, θ = {confidence['min_path_prob']}")
    key, costs, rows = next(r for r in results if r[0] == chosen["vocab"])
    row = next(r for r in rows if r["branching"] == chosen["branching"])
    profile = profiles[key]
    return dict(
        drafter=name, target=model_name, form="chain" if all(w == 1 for w in row["branching"]) else "tree",
        branching=row["branching"], k=len(row["branching"]) if all(w == 1 for w in row["branching"]) else None,
        draft_vocab=key, coverage=coverage, predicted_tau=row["tokens_per_pass"], predicted_ms_per_token=row["ms_per_token"],
        predicted_speedup=row["speedup"], measured=measured, confirmed=confirmed, confidence_stop=confidence,
        top=[dict(vocab=k, **{x: r[x] for x in ("branching", "tokens_per_pass", "ms_per_token", "speedup")})
             for k, _, rs in results for r in rs[:args.top]],
        profile=profile.to_dict(), profile_table=profile.table(), costs={k: v for k, v in costs.to_dict().items() if k != "curve"},
        cost_curve=curve.to_dict(), hardware=hardware_name(), torch_version=torch.__version__,
        seconds=time.perf_counter() - t0, command="python -m tree_spec.tools.tune " + " ".join(sys.argv[1:]),
    )


def print_coverage(target: Transformer, prompts: Sequence[Sequence[int]], subsets: dict[int, torch.Tensor],
                   new_tokens: int) -> dict[str, float]:
    """Print and return, per reduced draft vocabulary, the share of the tokens the target writes greedily after
    `prompts` that lie inside it ({size as text: share}; JSON keys are text)."""
    if not subsets:
        return {}
    with torch.inference_mode():
        written = [t for p in prompts for t in generate(target, list(p), new_tokens)[0].tolist()]
    coverage = {str(n): vocab_coverage(written, ids) for n, ids in subsets.items()}
    print("draft vocabulary coverage (the target's greedy tokens on the validation prompts inside it): "
          + ", ".join(f"{n} tokens {share:.1%}" for n, share in coverage.items()))
    return coverage


def dynamic_for(name: str, target: Transformer, tokenizer, model_name: str, curve: CostCurve,
                args: argparse.Namespace) -> dict:
    """EAGLE-2's tuned setting for head drafter `name` (`dynamic_search.tune_dynamic`), full and reduced vocabularies."""
    order = token_order(model_name, tokenizer, target.cfg.vocab_size)
    sizes = [n for n in args.vocab if 0 < n < target.cfg.vocab_size]
    drafters = {n: make_drafter(name, target, args.draft, args.heads, torch.tensor(order[:n]) if n else None)
                for n in [None, *sizes]}
    prompts, cost_prompts = tuning_prompts(tokenizer, args.prompts, args.validate_prompts)
    print(f"\n{name}: EAGLE-2 dynamic tree, validation on {args.validate_prompts} held-out prompts:")
    with one_thread():
        return tune_dynamic(name, target, drafters, prompts, cost_prompts, curve, args)


def save_dynamic(name: str, target: Transformer, tokenizer, curve: CostCurve, model_name: str,
                 args: argparse.Namespace, out: Path) -> dict:
    """Tune EAGLE-2's setting for `name` and write it into its saved tuning (models/tuned/<name>.json)."""
    path = out / f"{name}.json"
    result = json.loads(path.read_text()) if path.is_file() else dict(drafter=name, target=model_name)
    order = token_order(model_name, tokenizer, target.cfg.vocab_size)  # (a full tune prints coverage in tune_drafter)
    print_coverage(target, tuning_prompts(tokenizer, args.prompts, args.validate_prompts)[1],
                   {n: torch.tensor(order[:n]) for n in args.vocab if 0 < n < target.cfg.vocab_size}, args.validate_tokens)
    result["dynamic"] = dynamic_for(name, target, tokenizer, model_name, curve, args)
    result["dynamic"]["command"] = "python -m tree_spec.tools.tune " + " ".join(sys.argv[1:])  # re-tuned alone
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{name}: EAGLE-2 {dynamic_text(result['dynamic'])}, draft vocabulary "
          f"{result['dynamic']['draft_vocab'] or 'full'} -> {path}")
    return result


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
    p.add_argument("--validate-prompts", type=int, default=8,
                   help="held-out prompts per validation run (fewer let run-to-run noise decide); "
                        "0: save the best predicted shape unvalidated")
    p.add_argument("--validate-tokens", type=int, default=BENCH_NEW_TOKENS,
                   help="new tokens per validation prompt (default: the benchmark's, so a setting is chosen at the length "
                        "it is benchmarked at)")
    p.add_argument("--validate-top", type=int, default=3)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--curve", default=None, help="cost-curve JSON (default: measure it now, in this process)")
    p.add_argument("--out", default=str(TUNED_DIR))
    p.add_argument("--dynamic-only", action="store_true",
                   help="only (re)tune EAGLE-2's dynamic tree of eagle / eagle3, kept beside their saved shapes")
    p.add_argument("--breakdown", action="store_true",
                   help="only print where each head drafter's (and the small model's) call time goes, full vs reduced "
                        "vocabularies")
    args = p.parse_args(argv)
    target = load_model(args.target)
    tokenizer = load_tokenizer(resolve_model_path(args.target))
    model_name = Path(args.target).name
    if args.breakdown:
        prompts = held_out_prompts(tokenizer, 4, avoid=BENCH_PROMPTS)
        order = token_order(model_name, tokenizer, target.cfg.vocab_size)
        for name in [n for n in args.drafter if n in HEAD_FOLDERS or n == "small-model"]:
            for n in [None, *args.vocab] if name in HEAD_FOLDERS else [None]:  # a small model scores its whole vocabulary
                for rep in range(2):  # the first run warms up
                    vocab = torch.tensor(order[:n], device="cpu") if n else None
                    b = draft_call_breakdown(target, make_drafter(name, target, args.draft, args.heads, vocab), prompts)
                    if rep:
                        part = "head forward" if name in HEAD_FOLDERS else "its layers"
                        print(f"{name}, draft vocabulary {n or 'full'}: {b['total_ms']:.3f} ms per call = {part} "
                              f"{b['forward_ms']:.3f} + final norm and LM head {b['logits_ms']:.3f} + rest {b['other_ms']:.3f} "
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
    for i, name in enumerate(args.drafter, 1):
        if args.dynamic_only:
            if name in DYNAMIC_DRAFTERS:
                print(f"tuning {name}'s dynamic tree ({i}/{len(args.drafter)})", flush=True)
                saved.append(save_dynamic(name, target, tokenizer, curve, model_name, args, out))
            continue
        try:
            make_drafter(name, target, args.draft, args.heads)  # only this may fail for a missing or mismatched input
        except (FileNotFoundError, ValueError) as err:
            print(f"{name}: skipped ({err})")
            continue
        print(f"tuning {name} ({i}/{len(args.drafter)}): rank profile, costs, shape search, validation runs "
              "(minutes)", flush=True)
        result = tune_drafter(name, target, tokenizer, curve, model_name, args)
        if name in DYNAMIC_DRAFTERS:
            result["dynamic"] = dynamic_for(name, target, tokenizer, model_name, curve, args)
        path = out / f"{name}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"{name}: {shape_text(result['branching'])}, draft vocabulary {result['draft_vocab'] or 'full'}, "
              f"predicted tau {result['predicted_tau']:.2f}, {result['predicted_ms_per_token']:.3f} ms/token "
              f"({result['predicted_speedup']:.2f}x plain) -> {path}\n")
        saved.append(result)
    return saved


if __name__ == "__main__":
    main()
