"""The measured cost model: curve interpolation and fit, JSON round trip, timing on a real forward, profiles."""
import json
import time

import pytest
import torch

from tests.spec_models import perturbed_copy, random_model
from tree_spec import speculative_generate
from tree_spec.analysis.curve import (
    COSTS_DIR, CostCurve, ForwardTimer, forward_after, forward_times_after, measure_target_costs,
)
from tree_spec.analysis.clocks import last_level_cache_bytes
from tree_spec.analysis.profile import compare_profiles, matmul_split, profile_forward, profile_ops
from tree_spec.analysis.timing import (
    TimeSplit, measure_drafter_cost, time_split,
)
from tree_spec.drafters.model import ModelDrafter


def test_curve_interpolates_points_and_extrapolates_with_the_fitted_line():
    curve = CostCurve(new_tokens=[4, 1, 2, 8], ms_points=[7.0, 5.0, 6.0, 9.0], context=16)
    assert curve.new_tokens == [1, 2, 4, 8]  # sorted with their values
    assert curve.ms(1) == curve.decode_ms == 5.0
    assert curve.ms(3) == pytest.approx(6.5)  # halfway between the points at 2 and 4
    # n >= 2 points lie on 5 + 0.5 n exactly, so the fit recovers it; beyond 8 the line's slope continues
    assert (curve.intercept_ms, curve.slope_ms) == (pytest.approx(5.0), pytest.approx(0.5))
    assert curve.ms(12) == pytest.approx(11.0)
    assert curve.relative(4) == pytest.approx(7.0 / 5.0)


def test_curve_json_round_trip(tmp_path):
    curve = CostCurve(new_tokens=[1, 2, 4], ms_points=[1.0, 1.5, 2.0], context=8, model="m", hardware="cpu")
    back = CostCurve.from_json(curve.to_json(tmp_path / "c.json"))
    assert back == curve and CostCurve.from_json(tmp_path / "c.json") == curve
    assert json.loads(curve.to_json())["slope_ms"] == pytest.approx(0.25)


def test_measure_target_costs_on_a_real_forward_and_plot():
    target = random_model(seed=3)
    curve = measure_target_costs(target, new_tokens=(1, 2, 8, 128), context=16, repeats=3)
    assert curve.new_tokens == [1, 2, 8, 128] and all(ms > 0 for ms in curve.ms_points)
    # 128 new tokens cost about twice one on this tiny model (2.3-2.4 vs 1.2-1.3 ms here, idle), a gap above a
    # busy machine's noise; 32 tokens (1.25x) once came out cheaper than one with another process on a core
    assert curve.ms_points[-1] > curve.ms_points[0]
    assert curve.threads == 1 and curve.context == 16
    tree_curve = measure_target_costs(target, new_tokens=(1, 4), context=16, repeats=2, tree_shaped=True)
    assert tree_curve.tree_mask and len(tree_curve.ms_points) == 2
    fig = curve.plot()
    assert fig.axes and fig.axes[0].get_xlabel().startswith("new tokens")
    assert torch.get_num_threads() >= 1


def test_forward_timer_averages_its_samples_by_median_or_mean():
    timer = ForwardTimer(random_model(seed=3), [1, 4], context=8)
    timer.sample(2)
    assert [len(timer.times[n]) for n in (1, 4)] == [2, 2]  # the warm-up round is not kept
    timer.times = {1: [1.0, 2.0, 9.0], 4: [3.0, 3.0, 6.0]}  # a skewed sample: one slow forward
    median, mean = timer.curve(), timer.curve(average="mean")
    assert median.ms_points == [2.0, 3.0] and median.method.endswith("median")
    assert mean.ms_points == [4.0, 4.0] and mean.method.endswith("mean")
    with pytest.raises(ValueError, match="median"):
        timer.curve(average="mode")


def test_forward_after_times_the_forward_only_after_each_call_of_before():
    target, calls = random_model(seed=6), []

    def busy():  # 30 ms of CPU work that must not be counted
        calls.append(1)
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass

    ms = forward_after(target, busy, n_new=3, context=8, repeats=4)
    assert len(calls) == 5 and 0 < ms < 30  # one warm-up + 4 timed, each right after `before`
    assert forward_after(target, lambda: None, n_new=3, context=8, repeats=4) > 0


def test_forward_times_after_interleaves_the_conditions_round_by_round():
    target, order = random_model(seed=6), []

    def busy():  # 30 ms of CPU work that must not be counted
        order.append("busy")
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass

    times = forward_times_after(target, {"alone": lambda: order.append("alone"), "busy": busy}, 3, 8, repeats=4)
    assert order == ["alone", "busy", "busy", "alone"] * 2 + ["alone", "busy"]  # warm-up + 4 rounds, rotating
    assert [len(v) for v in times.values()] == [4, 4] and all(0 < ms < 30 for v in times.values() for ms in v)


def test_time_split_accounts_for_every_forward_and_draft_call():
    target, drafter = random_model(seed=4), ModelDrafter(perturbed_copy(random_model(seed=4)))
    out, split = time_split(lambda trace: speculative_generate(target, drafter, list(range(10)), 12, k=3, trace=trace),
                            target)
    assert split.prefill_sizes == {10: 1} and split.forwards == out.target_calls - 1  # the rest are verify passes
    assert set(split.forward_sizes) <= {1, 2, 3, 4} and min(split.prefill_ms, split.forward_ms, split.draft_ms) > 0
    assert split.rest_ms == pytest.approx(split.total_ms - split.prefill_ms - split.forward_ms - split.draft_ms)
    assert 0 <= split.rest_ms < split.total_ms  # the parts are timed inside the whole, on one clock
    assert [method for method, *_ in split.draft_calls].count("next_logits") == out.draft_calls  # one per draft level
    assert split.draft_ms == pytest.approx(sum(ms for *_, ms in split.draft_calls))
    pooled = split + split
    assert pooled.forward_sizes == {n: 2 * c for n, c in split.forward_sizes.items()}
    assert pooled.draft_calls == split.draft_calls * 2
    assert pooled.total_ms == 2 * split.total_ms and pooled.rest_ms == pytest.approx(2 * split.rest_ms)
    _, plain = time_split(lambda trace: None, target)  # no forward, no drafter: everything is the rest
    assert plain == TimeSplit(plain.total_ms) and plain.rest_ms == plain.total_ms


def test_measure_drafter_cost_times_every_level():
    target = random_model(seed=4)
    cost = measure_drafter_cost(ModelDrafter(perturbed_copy(target)), target, list(range(10)), new_tokens=12,
                                branching=(2, 1))
    assert cost.calls >= 2 and cost.ms_per_call > 0
    assert set(cost.by_width) <= {1, 2} and cost.ms(2) > 0


def test_profile_lists_ops_and_the_two_token_forward_builds_a_mask():
    target = random_model(seed=5)
    one = {op: calls for op, _, calls in profile_forward(target, 1, context=8, repeats=2)}
    two = {op: calls for op, _, calls in profile_forward(target, 2, context=8, repeats=2)}
    assert "linear" in one and "scaled_dot_product_attention" in one
    assert "tril" not in one and "tril" in two  # the causal mask exists only for T > 1
    assert "all ops" in compare_profiles(target, 1, 2, context=8)


def test_profile_ops_returns_the_result_and_exact_op_counts():
    target = random_model(seed=5)
    ids = torch.tensor([[1, 2, 3]], device="cpu")
    with torch.inference_mode():
        result, ops = profile_ops(lambda: target(ids))
        assert torch.equal(result, target(ids))
    layers = target.cfg.num_hidden_layers
    assert ops["scaled_dot_product_attention"][1] == layers     # one attention call per layer
    linear = {"linear", "_linear_pointwise"}  # 3 rows: mini_llm.linear's packed copy where oneDNN is built in
    calls = sum(ops[op][1] for op in linear if op in ops)
    assert calls == 4 * layers + 1                              # fused qkv, o, fused gate-up, down per layer + LM head
    assert all(ms >= 0 for ms, _ in ops.values())
    with torch.inference_mode():
        _, shaped = profile_ops(lambda: target(ids), by_shape=True)
    hidden, vocab = target.cfg.hidden_size, target.cfg.vocab_size
    lm_head = [calls for (op, shapes), (_, calls) in shaped.items() if op in linear and shapes[1] == (vocab, hidden)]
    assert lm_head == [1] and all(shapes[0][:2] == (1, 3) for (op, shapes) in shaped if op in linear)  # [1, 3, in]
    assert sum(n for (op, _), (_, n) in shaped.items() if op in linear) == calls
    a, b = torch.ones(2, 3), torch.ones(4, 3)                   # tensors inside a list are part of the key too
    _, cats = profile_ops(lambda: (torch.cat([a, a]), torch.cat([a, b])), by_shape=True)
    assert {key for key in cats if key[0] == "cat"} == {("cat", ((2, 3), (2, 3))), ("cat", ((2, 3), (4, 3)))}


def test_matmul_split_sums_the_profile_into_matmuls_and_the_rest():
    target = random_model(seed=5)
    split = matmul_split(target, n=1, context=8, repeats=2)
    assert split.op_calls > 7 * target.cfg.num_hidden_layers + 1 and split.matmul_ms > 0 and split.other_ms > 0
    assert split.total_ms == split.matmul_ms + split.other_ms


def test_recorded_curve_of_the_embedded_target():
    curve = CostCurve.from_json(COSTS_DIR / "tiny-qwen3.json")
    assert curve.model == "tiny-qwen3" and curve.threads == 1 and curve.new_tokens[0] == 1
    assert curve.hardware and curve.torch_version
    assert curve.relative(64) > 1.5  # a 64-token forward is not free on a CPU


def test_last_level_cache_is_the_largest_cpu_cache_listed(tmp_path):
    for index, size in enumerate(("48K", "2048K", "480M", "64K")):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert last_level_cache_bytes("cpu", tmp_path) == 480 * 2 ** 20
    assert last_level_cache_bytes("cpu", tmp_path / "missing") is None
