"""Tree tuning: rank-acceptance profiles, the step-cost model, the shape search, the saved tuned shapes."""
import itertools
import json

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec import ModelDrafter, tree_speculative_generate
from tree_spec.analysis.curve import CostCurve
from tree_spec.analysis.prompts import BENCH_PROMPTS, held_out_prompts, tuning_prompts
from tree_spec.core.topology import tree_node_count
from tree_spec.analysis.ranks import RankProfile, measure_rank_profile
from tree_spec.tools.search import (
    CONFIDENCE_DRAFTERS, FIXED_SHAPES, MARGIN, THETAS, CONFIDENCE_KS, branching_lists, choose, choose_stop,
    finalist_indices, kept_shape, rank_shapes,
)
from tree_spec.tools.step_costs import StepCosts
from tree_spec.analysis.tuned import CONFIDENCE_STOP, TUNED_DIR, load_tuned
from tree_spec.tools.named_drafters import DRAFTERS, tuned_drafter, vocab_coverage
from tests.spec_models import perturbed_copy, prompts, random_model


def _profile(paths: dict[str, int], depth: int = 3, max_rank: int = 4) -> RankProfile:
    """Each position its own one-position prompt: the decoder's walk visits every one of them."""
    return RankProfile("synthetic", max_rank, depth, [[key] for key, n in paths.items() for _ in range(n)])


def test_reach_counts_a_depth_only_when_every_shallower_rank_fits_its_width():
    # 4 positions: ranks (1,1,1), (2,1,3), (1,3) then a miss, a miss at depth 1
    profile = _profile({"1 1 1": 1, "2 1 3": 1, "1 3": 1, "": 1})
    assert profile.positions == 4
    assert profile.reach([1, 1, 1]) == [0.5, 0.25, 0.25]  # chain: only rank-1 at every depth
    assert profile.reach([2, 1, 1]) == [0.75, 0.5, 0.25]
    assert profile.reach([2, 3, 3]) == [0.75, 0.75, 0.5]  # (1, 3) has no depth-3 rank: it missed there
    assert profile.tokens_per_pass([2, 1, 1]) == pytest.approx(1 + 0.75 + 0.5 + 0.25)
    table = profile.table()
    assert table[0] == [0.5, 0.25, 0.0, 0.0]  # depth 1: all 4 positions
    assert table[1] == pytest.approx([2 / 3, 0.0, 1 / 3, 0.0])  # depth 2: the 3 positions in the top 4 at depth 1
    with pytest.raises(ValueError, match="depth 3"):
        profile.reach([1, 1, 1, 1])
    again = RankProfile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again.reach([2, 3, 3]) == profile.reach([2, 3, 3])


def test_the_walk_averages_over_the_positions_a_decoder_visits():
    # one prompt, positions 0..3; a chain of 2 accepts 0, 1, 0, 2 tokens there
    profile = RankProfile("synthetic", 4, 2, [["", "1", "", "1 1"]])
    # the decoder visits 0 (accepts 0) -> 1 (accepts 1, skips 2) -> 3: one miss in three passes, not two in four
    assert profile.reach([1, 1]) == pytest.approx([2 / 3, 1 / 3])
    assert profile.reach([1, 1], walk=False) == pytest.approx([2 / 4, 1 / 4])
    assert profile.tokens_per_pass([1, 1]) == pytest.approx((1 + 2 + 3) / 3)  # tokens committed / passes


def test_a_new_shape_replaces_the_fixed_one_only_when_clearly_faster():
    def row(branching, ms, vocab=None):
        return dict(vocab=vocab, branching=branching, ms_per_token=ms)

    fixed = [[1, 1, 1, 1], [2, 2, 1, 1]]
    slightly = 1.0 - MARGIN / 2
    assert choose([row([1, 1, 1, 1], 1.0), row([2, 3], slightly)], fixed)["branching"] == [1, 1, 1, 1]
    assert choose([row([1, 1, 1, 1], 1.0), row([1, 1, 1, 1], slightly, vocab=1024)], fixed)["vocab"] is None
    assert choose([row([1, 1, 1, 1], 1.0), row([2, 3], 0.8)], fixed)["branching"] == [2, 3]
    assert choose([row([2, 2, 1, 1], 1.0), row([1, 1, 1, 1], 0.9), row([2, 3], 0.88)], fixed)["branching"] == [1, 1, 1, 1]
    assert choose([row([2, 3], 1.0), row([3], 0.99)], fixed)["branching"] == [3]  # no fixed shape measured


def test_a_new_confidence_stop_replaces_the_default_only_when_clearly_faster():
    pairs = ((6, 0.1), (6, 0.3), (12, 0.1))
    rows = lambda ms: [dict(k=k, min_path_prob=t, ms_per_token=m) for (k, t), m in zip(pairs, ms)]
    assert choose_stop(rows([2.0, 2.5, 2.6]), (6, 0.3)) == (6, 0.1)     # 20 % faster: replaces the default
    assert choose_stop(rows([2.6, 2.5, 2.0]), (6, 0.3)) == (12, 0.1)    # a longer cap, 20 % faster
    assert choose_stop(rows([2.45, 2.5, 2.6]), (6, 0.3)) == (6, 0.3)    # 2 % faster: noise, the default stays
    assert choose_stop(rows([2.6, 2.5, 2.7]), (6, 0.3)) == (6, 0.3)     # the default is the fastest


def test_finalists_are_the_kept_row_then_the_fastest_others():
    rows = [dict(ms_per_token=ms) for ms in (3.0, 1.0, 2.5, 0.5, 2.0, 4.0)]
    assert finalist_indices(rows, kept=0, finalists=3) == [0, 3, 1, 4]
    assert finalist_indices(rows, kept=3, finalists=2) == [3, 1, 4]  # the kept row is not counted twice
    assert finalist_indices(rows, kept=5, finalists=9) == [5, 3, 1, 4, 2, 0]  # fewer rows than finalists: all
    measured = [dict(vocab=None, branching=[1, 1], ms_per_token=2.0), dict(vocab=None, branching=[2], ms_per_token=1.5),
                dict(vocab=1024, branching=[1, 1], ms_per_token=1.0)]
    assert kept_shape(measured, [[1, 1], [2]]) is measured[1]  # the fastest fixed shape of the full vocabulary
    assert kept_shape(measured, [[3]]) is measured[2]  # no fixed shape measured: the fastest row


def test_branching_lists_respect_their_limits():
    shapes = branching_lists(max_depth=3, max_width=3, max_nodes=10)
    assert [1] in shapes and [1, 1, 1] in shapes and [3, 2] in shapes  # 3 + 6 = 9 nodes
    assert [3, 3] not in shapes  # 12 nodes
    assert all(len(s) <= 3 and max(s) <= 3 and tree_node_count(s) <= 10 for s in shapes)
    assert len(shapes) == len({tuple(s) for s in shapes})


def _costs(slope_ms: float, draft_ms: float = 0.1) -> StepCosts:
    curve = CostCurve(new_tokens=[1, 64], ms_points=[1.0, 1.0 + 63 * slope_ms], context=0)
    return StepCosts(curve, draft_ms, 0.0, 0.0, 0.0, 0.0, plain_ms_per_token=1.0)


def test_search_picks_width_only_when_verifying_it_is_cheap():
    # rank-2 candidates hit often: width pays when nodes are free, not when each node costs a decode step
    profile = _profile({"1 1 1": 30, "2 2 2": 30, "1 2": 20, "": 20})
    cheap = rank_shapes(profile, _costs(slope_ms=0.0), max_width=2)
    dear = rank_shapes(profile, _costs(slope_ms=1.0), max_width=2)
    assert cheap[0]["branching"] == [2, 2, 2]
    assert dear[0]["branching"] == [1]  # one node: 1 + 0.5 tokens for 2 ms + drafting
    for rows in (cheap, dear):
        assert [r["ms_per_token"] for r in rows] == sorted(r["ms_per_token"] for r in rows)
        best = rows[0]
        assert best["ms_per_token"] == pytest.approx(best["total_ms"] / profile.tokens_per_pass(best["branching"]))


def test_a_perfect_drafter_has_rank_one_everywhere_and_its_tree_passes_predict_exactly():
    target = random_model(seed=0)
    ps = prompts(target.cfg.vocab_size, 2, length=6)
    profile = measure_rank_profile(target, ModelDrafter(target), ps, new_tokens=10, depth=3, max_rank=4)[None]
    assert profile.positions == 20 and {k for seq in profile.sequences for k in seq} == {"1 1 1"}
    out = tree_speculative_generate(target, ModelDrafter(target), ps[0], 33, branching=[2, 1, 1])
    assert out.tokens == generate(target, torch.tensor([ps[0]], device="cpu"), 33)[0].tolist()
    assert set(out.accepted_per_call[:-1]) == {3}  # every pass accepts the whole depth ...
    assert profile.tokens_per_pass([2, 1, 1]) == 4.0  # ... as the profile predicts


def test_profile_of_a_noisy_drafter_and_of_its_reduced_vocabulary():
    target = random_model(seed=0)
    draft = perturbed_copy(target, noise=0.15)
    ps = prompts(target.cfg.vocab_size, 3, length=6)
    subset = torch.arange(0, target.cfg.vocab_size, 2, device="cpu")  # even token ids only
    profiles = measure_rank_profile(target, ModelDrafter(draft), ps, new_tokens=16, depth=3, max_rank=4,
                                    vocab_subsets={len(subset): subset})
    full, half = profiles[None], profiles[len(subset)]
    assert full.positions == half.positions == 48
    reach_full = full.reach([4, 4, 4])
    assert 0 < reach_full[0] < 1 and reach_full == sorted(reach_full, reverse=True)
    # the target's token is proposable only when it is even: a subset never reaches more often at depth 1
    assert half.reach([4])[0] <= full.reach([4])[0]


def test_reduced_draft_vocabulary_keeps_greedy_identical_and_only_proposes_its_tokens():
    from tree_spec.drafters.features import HeadDrafter, MedusaDrafter
    from tree_spec.drafters.heads import make_head

    target = random_model(seed=0)
    subset = torch.arange(0, target.cfg.vocab_size, 3, device="cpu")
    torch.manual_seed(0)
    with torch.device("cpu"):
        eagle, medusa = make_head("eagle", target.cfg), make_head("medusa", target.cfg)
    for drafter in (HeadDrafter(target, eagle, subset), MedusaDrafter(target, medusa, subset)):
        p = prompts(target.cfg.vocab_size, 1, length=8)[0]
        out = tree_speculative_generate(target, drafter, p, 24, branching=[2, 2, 1])
        assert out.tokens == generate(target, torch.tensor([p], device="cpu"), 24)[0].tolist()
        logits = drafter.logits(torch.randn(2, target.cfg.hidden_size, device="cpu"))
        outside = torch.ones(target.cfg.vocab_size, dtype=torch.bool, device="cpu")
        outside[subset] = False
        assert torch.isinf(logits[:, outside]).all() and torch.isfinite(logits[:, subset]).all()
        ones = torch.ones(1, target.cfg.hidden_size, device="cpu")
        full = target.logits_from_hidden(ones)
        assert torch.allclose(drafter.logits(ones)[:, subset], full[:, subset], atol=1e-5)


@pytest.mark.parametrize("name", DRAFTERS)
def test_saved_tuning_is_complete_and_runs_identically(name):
    tuned = load_tuned(name)
    if tuned is None:
        pytest.skip(f"no {TUNED_DIR / name}.json")
    for key in ("drafter", "form", "branching", "predicted_tau", "predicted_ms_per_token", "cost_curve", "profile"):
        assert key in tuned, key
    profile = RankProfile.from_dict(tuned["profile"])
    assert tuned["predicted_tau"] == pytest.approx(profile.tokens_per_pass(tuned["branching"]))
    if tuned["measured"]:  # validated: the saved shape is `choose`'s pick from the finalists' run
        measured, confirmed = tuned["measured"], tuned["confirmed"]
        shapes = lambda rows: [(m["vocab"], m["branching"]) for m in rows]  # noqa: E731
        final = finalist_indices(measured, measured.index(kept_shape(measured, FIXED_SHAPES[name])))
        assert shapes(confirmed) == shapes([measured[i] for i in final])
        chosen = choose(confirmed, FIXED_SHAPES[name])
        assert (chosen["vocab"], chosen["branching"]) == (tuned["draft_vocab"], tuned["branching"])
        ran = [m["branching"] for m in measured]
        assert all(list(s) in ran for s in FIXED_SHAPES[name] if len(s) <= profile.depth)
    if name in CONFIDENCE_DRAFTERS and tuned["measured"]:  # validated heads: θ chosen by the same rule
        stop = tuned["confidence_stop"]
        default = (CONFIDENCE_STOP["k"], CONFIDENCE_STOP["min_path_prob"])
        pairs = lambda rows: [(m["k"], m["min_path_prob"]) for m in rows]  # noqa: E731
        final = finalist_indices(stop["measured"], pairs(stop["measured"]).index(default))
        assert pairs(stop["confirmed"]) == pairs([stop["measured"][i] for i in final])
        assert (stop["k"], stop["min_path_prob"]) == choose_stop(stop["confirmed"], default)
    target = load_model("tiny-qwen3")
    drafter, branching = tuned_drafter(name, target)
    assert branching == tuned["branching"]
    p = list(range(40, 72))
    out = tree_speculative_generate(target, drafter, p, 20, branching=branching)
    assert out.tokens == generate(target, torch.tensor([p], device="cpu"), 20)[0].tolist()


@pytest.mark.slow
def test_cli_profiles_costs_searches_validates_and_saves(tmp_path, capsys):
    from tree_spec.tools.tune import main

    saved = main(["--drafter", "mtp", "--prompts", "1", "--new-tokens", "6", "--depth", "3", "--vocab", "1024",
                  "--validate-prompts", "1", "--validate-tokens", "12", "--validate-top", "1", "--top", "3",
                  "--curve", str(TUNED_DIR.parent / "costs" / "tiny-qwen3.json"), "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert "rank-r candidate at depth d" in text and "draft vocabulary 1024" in text and "validation" in text
    assert "draft vocabulary coverage" in text
    tuned = json.loads((tmp_path / "mtp.json").read_text())
    # coverage: the share of the target's greedy tokens on the validation prompt inside the 1024 most frequent
    validation = tuning_prompts(load_tokenizer("tiny-qwen3"), 1, 1)[1]
    written = generate(load_model("tiny-qwen3"), torch.tensor(validation), 12)[0].tolist()
    order = json.loads((TUNED_DIR / "token_frequency-tiny-qwen3.json").read_text())["order"]
    assert tuned["coverage"]["1024"] == pytest.approx(vocab_coverage(written, order[:1024])) and tuned["coverage"]["1024"] > 0.5
    assert tuned == json.loads(json.dumps(saved[0]))
    assert tuned["drafter"] == "mtp" and tuned["draft_vocab"] in (None, 1024)
    assert len(tuned["branching"]) <= 3  # the profile is 3 deep: fixed shapes deeper than it are not run
    assert (1, 1, 1) in {tuple(m["branching"]) for m in tuned["measured"]}
    stop = tuned["confidence_stop"]  # MTP pays one call per depth: its confidence-stopped chains were run too
    default = (CONFIDENCE_STOP["k"], CONFIDENCE_STOP["min_path_prob"])
    assert "confidence stop" in text
    assert {(m["k"], m["min_path_prob"]) for m in stop["measured"]} == {*itertools.product(CONFIDENCE_KS, THETAS), default}
    assert (stop["k"], stop["min_path_prob"]) == choose_stop(stop["confirmed"], default)
    assert (stop["confirmed"][0]["k"], stop["confirmed"][0]["min_path_prob"]) == default
    chosen = choose(tuned["confirmed"], FIXED_SHAPES["mtp"])  # the shape too: picked from the finalists' run
    assert (chosen["vocab"], chosen["branching"]) == (tuned["draft_vocab"], tuned["branching"])


def test_vocab_coverage_is_the_share_of_tokens_inside_the_draft_vocabulary():
    assert vocab_coverage([1, 2, 3, 4, 1], torch.tensor([1, 2])) == 0.6
    assert vocab_coverage([], [1]) == 0.0


@pytest.mark.parametrize("kind", ["small model", "eagle head"])
def test_draft_call_breakdown_splits_a_call_into_forward_lm_head_and_rest(kind):
    from tree_spec.tools.step_costs import draft_call_breakdown
    from tree_spec.drafters.features import HeadDrafter
    from tree_spec.drafters.heads import make_head

    target = random_model()
    torch.manual_seed(0)
    with torch.device("cpu"):
        drafter = (ModelDrafter(perturbed_copy(target)) if kind == "small model"
                   else HeadDrafter(target, make_head("eagle", target.cfg)))
    parts = draft_call_breakdown(target, drafter, prompts(target.cfg.vocab_size, 2), new_tokens=12,
                                 branching=(2, 1), repeats=3)
    assert parts["calls"] > 0
    # the forward hooks saw the drafter's model or head, and its LM head was timed on the rows it scored
    assert parts["forward_ms"] > 0 and parts["logits_ms"] > 0
    assert parts["total_ms"] == pytest.approx(parts["forward_ms"] + parts["logits_ms"] + parts["other_ms"])


def test_the_tuners_prompts_avoid_the_benchmarks():
    tokenizer = load_tokenizer("tiny-qwen3")
    bench = held_out_prompts(tokenizer, BENCH_PROMPTS)
    tuning = [p for part in tuning_prompts(tokenizer, 8, 8) for p in part]
    assert len(tuning) == 16 and len({tuple(p) for p in tuning}) == 16
    assert not {tuple(p) for p in tuning} & {tuple(p) for p in bench}
    assert held_out_prompts(tokenizer, 16) == bench  # no avoid: the benchmark's own prompts
