"""EAGLE-2's tuner: the dynamic profile replays the decoder, the candidates cover every width and vocabulary."""
import pytest
import torch

from mini_llm import generate, load_model
from mini_llm.load import MODELS_DIR
from tree_spec.tools.dynamic_search import (
    DynamicProfile, dynamic_candidates, measure_dynamic_profile, rank_dynamic,
)
from tree_spec.tools.search import fastest_unless_close, finalist_indices
from tree_spec.analysis.tuned import FIXED_DYNAMIC, dynamic_setting, load_tuned
from tree_spec.tools.named_drafters import DYNAMIC_DRAFTERS, make_drafter, tuned_dynamic
from tree_spec.decoding.dynamic import dynamic_tree_speculative_generate


def test_tokens_per_pass_walks_the_measured_positions():
    # one prompt, 4 positions; ranks at depth cap 2 of the target's path nodes at each position
    ranks = [[[[1], [1, 2]], [[3], [3, 5]], [[1], [1]], [[2], [2, 4]]]]
    profile = DynamicProfile(width=2, depth=2, ranks=ranks)
    # total 2: position 0 accepts 2 (ranks 1, 2) -> next pass at 3, which accepts 1 (rank 2): 2 passes, 5 tokens
    assert profile.tokens_per_pass(2, 2) == pytest.approx(5 / 2)
    # total 1: 0 accepts 1 -> 2 accepts 1 -> done: 2 passes, 4 tokens
    assert profile.tokens_per_pass(2, 1) == pytest.approx(4 / 2)


def test_candidates_keep_every_width_and_vocabulary_of_the_best_depths():
    row = lambda depth, width, vocab, ms: dict(depth=depth, width=width, total_tokens=depth + width, vocab=vocab,
                                               ms_per_token=ms)
    ranked = [row(3, 2, 1024, 1.0), row(3, 2, 1024, 1.1), row(3, 2, None, 1.2), row(3, 4, None, 1.3),
              row(5, 2, 1024, 1.05), row(5, 3, None, 1.4), row(2, 2, None, 1.5)]
    picked = dynamic_candidates(ranked, top_depths=2)
    assert [(s["depth"], s["width"], vocab) for vocab, s in picked] == [
        (3, 2, 1024), (3, 2, None), (3, 4, None), (5, 2, 1024), (5, 3, None)]
    assert all(set(s) == set(FIXED_DYNAMIC) for _, s in picked)
    assert picked[0][1]["total_tokens"] == 5  # the fastest row of its kind, not a later one


@pytest.mark.slow
def test_the_profile_predicts_a_real_runs_acceptance_pass_by_pass():
    target = load_model("tiny-qwen3")
    drafter = make_drafter("eagle", target)
    prompt, new_tokens, depth, width, total = list(range(40, 104)), 24, 4, 2, 5
    profile = measure_dynamic_profile(target, drafter, [prompt], new_tokens, depth, width)
    out = dynamic_tree_speculative_generate(target, drafter, prompt, new_tokens + depth + 2, depth=depth, width=width,
                                            total_tokens=total)
    walked, t, positions = [], 0, profile.ranks[0]
    while t < len(positions):  # the replay that tokens_per_pass averages
        accepted = sum(1 for r in positions[t][depth - 1] if r <= total)
        walked.append(accepted)
        t += accepted + 1
    assert len(walked) >= 3
    assert out.accepted_per_call[:len(walked)] == walked
    # the prediction the search ranks settings by is the same walk, averaged
    predicted = [r for r in rank_dynamic([profile], _flat_costs(), 63)
                 if (r["depth"], r["total_tokens"]) == (depth, total)][0]["tokens_per_pass"]
    assert predicted == pytest.approx(sum(a + 1 for a in walked) / len(walked))


def _flat_costs():
    """Step costs of 1 ms per draft level and per verify, no overhead: enough to rank settings."""
    from tree_spec.analysis.curve import CostCurve
    from tree_spec.tools.step_costs import StepCosts

    curve = CostCurve(new_tokens=[1, 64], ms_points=[1.0, 1.0], context=0)
    return StepCosts(curve=curve, draft_ms=1.0, draft_per_node_ms=0.0, draft_first_ms=0.0, verify_extra_ms=0.0,
                     overhead_ms=0.0, plain_ms_per_token=1.0)


@pytest.mark.parametrize("name", DYNAMIC_DRAFTERS)
def test_saved_dynamic_setting_runs_identically(name):
    tuned = load_tuned(name)
    if tuned is None or not tuned.get("dynamic"):
        pytest.skip(f"no dynamic tuning for {name}")
    target = load_model("tiny-qwen3")
    drafter, setting = tuned_dynamic(name, target, MODELS_DIR / "heads")
    saved = tuned["dynamic"]
    stop = {"min_path_prob": saved["min_path_prob"]} if saved.get("min_path_prob") else {}
    assert setting == {k: saved[k] for k in ("depth", "width", "total_tokens")} | stop
    measured = tuned["dynamic"]["measured"]
    assert any(m["vocab"] is None and all(m[k] == v for k, v in FIXED_DYNAMIC.items()) for m in measured)
    if "confirmed" in saved:  # the validated setting's finalists: the fixed setting first, then the fastest others
        fixed = next(i for i, m in enumerate(measured) if m["vocab"] is None and dynamic_setting(m) == FIXED_DYNAMIC)
        settings = lambda rows: [(m["vocab"], dynamic_setting(m)) for m in rows]  # noqa: E731
        assert settings(saved["confirmed"]) == settings([measured[i] for i in finalist_indices(measured, fixed)])
        chosen = fastest_unless_close(saved["confirmed"], saved["confirmed"][0])
        assert saved["stop_confirmed"][0]["min_path_prob"] == 0.0
        assert dynamic_setting(saved["stop_confirmed"][0]) == dynamic_setting(chosen)  # the stop's sweep starts there
        assert saved["draft_vocab"] == chosen["vocab"]
    if "stop_confirmed" in saved:  # the depth stop was tuned: the saved pick follows the rule from its finalists' run
        no_stop = saved["stop_confirmed"][0]
        pick = fastest_unless_close(saved["stop_confirmed"], no_stop)
        keys = ("depth", "width", "total_tokens", "min_path_prob")
        assert no_stop["min_path_prob"] == 0.0 and [saved[k] for k in keys] == [pick[k] for k in keys]
    p = list(range(40, 72))
    out = dynamic_tree_speculative_generate(target, drafter, p, 20, **setting)
    assert out.tokens == generate(target, torch.tensor([p], device="cpu"), 20)[0].tolist()


def test_depth_stop_tuning_measures_each_base_cap_and_theta_and_keeps_no_stop_unless_clearly_faster():
    from tree_spec.tools.dynamic_search import tune_dynamic_stop
    from tree_spec.tools.search import MARGIN
    from tree_spec.drafters.features import HeadDrafter
    from tree_spec.drafters.heads import make_head
    from tests.spec_models import prompts, random_model

    target = random_model(seed=0)
    torch.manual_seed(0)
    drafter = HeadDrafter(target, make_head("eagle", target.cfg))
    bases = [dict(depth=2, width=2, total_tokens=4), dict(depth=3, width=3, total_tokens=5)]
    found = tune_dynamic_stop(target, drafter, bases, prompts(target.cfg.vocab_size, 2, length=8, seed=1), 10,
                              max_depth=3, thetas=(0.2, 0.4), rounds=1, finalists=2)
    tried = [(m["depth"], m["width"], m["min_path_prob"]) for m in found["measured"]]
    # the first base without a stop, then every base under every cap (its depth, max_depth) with every θ
    assert tried == [(2, 2, 0.0), (2, 2, 0.2), (2, 2, 0.4), (3, 2, 0.2), (3, 2, 0.4), (3, 3, 0.2), (3, 3, 0.4)]
    keys = ("depth", "width", "total_tokens", "min_path_prob")
    fastest = sorted(found["measured"][1:], key=lambda m: m["ms_per_token"])[:2]
    confirmed = found["confirmed"]  # timed again, apart: no stop, then the 2 fastest stopped settings of the sweep
    assert [[m[k] for k in keys] for m in confirmed] == [[m[k] for k in keys] for m in found["measured"][:1] + fastest]
    no_stop, best = confirmed[0], min(confirmed, key=lambda m: m["ms_per_token"])
    pick = best if best["ms_per_token"] < (1 - MARGIN) * no_stop["ms_per_token"] else no_stop
    assert [found["setting"][k] for k in keys] == [pick[k] for k in keys]
    assert found["base"] == bases[0 if pick["width"] == 2 else 1]


def test_stop_bases_are_the_chosen_setting_then_each_other_widths_fastest_of_its_vocabulary():
    from tree_spec.tools.dynamic_search import stop_bases

    def row(vocab, depth, width, total, ms):
        return dict(vocab=vocab, depth=depth, width=width, total_tokens=total, ms_per_token=ms)

    measured = [row(None, 6, 4, 24, 5.0), row(None, 4, 2, 11, 4.9), row(None, 6, 2, 15, 4.8), row(2048, 4, 3, 9, 4.0),
                row(None, 5, 3, 16, 5.2), row(None, 4, 4, 15, 4.7)]
    chosen = measured[0]
    assert stop_bases(measured, chosen) == [
        dict(depth=6, width=4, total_tokens=24), dict(depth=6, width=2, total_tokens=15),
        dict(depth=5, width=3, total_tokens=16)]
