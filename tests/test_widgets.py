"""The notebook panels: drive the sliders by setting `.value`, check what the plain functions compute."""
import matplotlib

matplotlib.use("Agg")

import re
from pathlib import Path

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec.drafters.model import QuantizedSelfDrafter
from tree_spec.ui.plots import draw_mask, draw_tree
from tree_spec import ModelDrafter, tree_speculative_generate
from tree_spec.analysis.curve import COSTS_DIR, CostCurve
from tree_spec.analysis.prompts import tuning_prompts
from tree_spec.analysis.speedup import (
    chain_break_even_alpha, expected_speedup, expected_tokens_per_verify, speedup_table, tree_expected_tokens,
)
from tree_spec.core.topology import tree_node_count
from tree_spec.analysis.tuned import load_profile, load_tuned
from tree_spec.ui.batch_panel import batch_panel, batch_report
from tree_spec.ui.chain_panel import speedup_panel
from tree_spec.ui.tree_panel import H100, IID, MEASURED, MEASURED_CURVE, parse_branching, tree_panel, tree_report
from tree_spec.ui.tree_viewer import inspect_tree_step, tree_viewer_panel


@pytest.fixture(scope="module")
def target_model():
    return load_model("tiny-qwen3")


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny-qwen3")


def test_speedup_panel_follows_its_sliders():
    panel = speedup_panel()
    assert panel.result["tokens_per_verify"] == pytest.approx(3.36, abs=0.005)  # alpha 0.8, k 4
    panel.controls["alpha"].value = 0.6
    panel.controls["k"].value = 6
    panel.controls["c"].value = 0.2
    assert panel.result["speedup"] == pytest.approx(expected_speedup(0.6, 6, 0.2))
    assert "faster" in panel.html.value
    panel.controls["alpha"].value = 0.1  # below break-even for k 6, c 0.2
    assert panel.result["speedup"] < 1 and "SLOWER" in panel.html.value


def test_chain_break_even_alpha_solves_speedup_one():
    for k, c in [(1, 0.1), (4, 0.05), (8, 0.3)]:
        alpha = chain_break_even_alpha(k, c)
        assert expected_speedup(alpha, k, c) == pytest.approx(1.0, abs=1e-9)
    assert chain_break_even_alpha(4, 1.0) is None  # a draft token as costly as the target never pays


def test_tree_panel_turns_slower_when_verifying_its_nodes_costs_too_much():
    panel = tree_panel(width=2, depth=4, hit_rate=0.6, draft_cost=0.05, hit_model=IID, hardware=H100)
    assert panel.result["nodes"] == tree_node_count([2, 2, 2, 2]) == 30
    assert panel.result["speedup"] > 1 and "faster" in panel.html.value
    panel.controls["width"].value = 6
    panel.controls["depth"].value = 6  # 55,986 nodes: far past the compute roof
    assert panel.result["nodes"] == tree_node_count([6] * 6)
    assert panel.result["verify_ms"] > 10 * panel.result["decode_ms"]
    assert panel.result["speedup"] < 1 and "SLOWER" in panel.html.value


def test_tree_panel_batch_makes_a_good_tree_slower():
    panel = tree_panel(width=2, depth=4, hit_rate=0.6, draft_cost=0.05, hit_model=IID, hardware=H100)
    assert panel.result["speedup"] > 1
    panel.controls["batch"].value = 256
    assert panel.result["verify_tokens"] == 256 * 31
    assert panel.result["speedup"] < 1


def shown(panel) -> tuple[str, str]:
    """What the panel shows: its text, and its plot as the PNG a static viewer gets."""
    assert panel.error is None, panel.error
    snapshot = panel.snapshot_html()
    return panel.html.value, snapshot[snapshot.index("<img"):]


def every_control_changes_what_is_shown(panel, new_values: dict) -> None:
    """Set each control in turn (every control of the panel: new_values names them all); text and plot change."""
    assert set(new_values) == set(panel.controls), "name a new value for every control"
    before = shown(panel)
    for name, value in new_values.items():
        assert panel.controls[name].value != value, name
        panel.controls[name].value = value
        after = shown(panel)
        assert after[0] != before[0], f"{name} = {value!r} left the text unchanged"
        assert after[1] != before[1], f"{name} = {value!r} left the plot unchanged"
        before = after


def test_every_chain_panel_control_changes_text_and_plot():
    every_control_changes_what_is_shown(speedup_panel(), {"alpha": 0.6, "k": 6, "c": 0.2})


def test_every_batch_panel_control_changes_text_and_plot():
    every_control_changes_what_is_shown(batch_panel(), {"batch": 64, "alpha": 0.6, "k": 6, "draft_cost": 0.2})


@pytest.mark.parametrize("hit_model, hardware, to_model, to_hardware",
                         [(MEASURED, MEASURED_CURVE, IID, H100), (IID, H100, MEASURED, MEASURED_CURVE)])
def test_every_tree_panel_control_changes_text_and_plot(hit_model, hardware, to_model, to_hardware):
    if load_profile("small-model") is None or not (COSTS_DIR / "tiny-qwen3.json").is_file():
        pytest.skip("no measured profile or cost curve")
    panel = tree_panel(hit_model=hit_model, hardware=hardware)
    every_control_changes_what_is_shown(panel, {
        "branching": "3,2,1", "width": 3, "depth": 5, "hit_rate": 0.4, "draft_cost": 0.1, "batch": 8,
        "hit_model": to_model, "hardware": to_hardware,
    })


def test_tree_panel_sliders_write_the_branching_box():
    """One source of truth for the shape: the box. The width and depth sliders write it; a typed shape is used
    as typed until a slider moves again."""
    panel = tree_panel(width=2, depth=4, hit_rate=0.6, draft_cost=0.05, hit_model=IID, hardware=H100)
    box = panel.controls["branching"]
    assert box.value == "2,2,2,2" and panel.result["branching"] == [2, 2, 2, 2] and not panel.result["custom"]
    panel.controls["width"].value = 3
    assert box.value == "3,3,3,3" and panel.result["branching"] == [3, 3, 3, 3]
    assert "branching [3, 3, 3, 3]: 120 draft nodes" in panel.html.value
    marker = panel._draw(panel.result).axes[0].lines[-1]  # the circle on the map sits on (width, depth)
    assert (list(marker.get_xdata()), list(marker.get_ydata())) == ([3], [4])
    panel.controls["depth"].value = 2
    assert box.value == "3,3" and panel.result["nodes"] == 12
    box.value = "2, 2, 1, 1"  # typed: used as typed, the map marks no full tree and names it in its title
    assert panel.result["branching"] == [2, 2, 1, 1] and panel.result["custom"]
    assert "your branching [2, 2, 1, 1]" in panel._draw(panel.result).axes[0].get_title()
    panel.controls["depth"].value = 3  # a slider moves: the box is the sliders' full tree again
    assert box.value == "3,3,3" and panel.result["branching"] == [3, 3, 3] and not panel.result["custom"]
    box.value = ""  # an empty box: width x depth
    assert panel.result["branching"] == [3, 3, 3]


def test_tree_panel_depth_slider_stops_where_the_profile_was_measured():
    profile = load_profile("small-model")
    if profile is None:
        pytest.skip("no models/tuned/small-model.json")
    panel = tree_panel(width=2, depth=4, hit_model=MEASURED)
    depth = panel.controls["depth"]
    assert depth.max == profile.depth
    panel.controls["hit_model"].value = IID  # i.i.d. candidates have no depth limit
    depth.value = 7
    assert panel.controls["branching"].value == "2,2,2,2,2,2,2" and panel.error is None
    panel.controls["hit_model"].value = MEASURED  # back to the profile: depth clamped, the box follows
    assert depth.value == profile.depth and panel.result["branching"] == [2] * profile.depth and panel.error is None


def test_speedup_map_is_diverging_colour_blind_safe_and_centred_on_1x():
    from matplotlib.colors import TwoSlopeNorm

    panel = tree_panel(width=2, depth=4, hit_rate=0.6, draft_cost=0.05, hit_model=IID, hardware=H100)
    image = panel._draw(panel.result).axes[0].images[0]
    assert image.get_cmap().name == "RdBu"
    assert isinstance(image.norm, TwoSlopeNorm) and image.norm.vcenter == 1.0


def test_tree_report_chain_matches_the_chain_formula():
    r = tree_report(1, 4, 0.8, draft_cost=0.05, batch=1)
    # batch 1, 5 tokens: memory-bound, so verify costs one decode step; 4 levels cost 4 * 0.05 decode steps
    assert r["verify_ms"] == pytest.approx(r["decode_ms"])
    assert r["speedup"] == pytest.approx(expected_speedup(0.8, 4, 0.05))
    assert r["speedup"] == pytest.approx(r["chain_speedup"])
    assert tree_report(2, 3, 0.6)["expected_tokens"] == pytest.approx(tree_expected_tokens([2, 2, 2], 0.6))


def test_tree_panel_takes_any_branching_list_and_this_machines_cost_curve():
    curve = CostCurve.from_json(COSTS_DIR / "tiny-qwen3.json")
    panel = tree_panel(hit_model=IID, hardware=MEASURED_CURVE, hit_rate=0.6, draft_cost=0.1)
    panel.controls["branching"].value = "2, 2, 1, 1"
    r = panel.result
    assert r["branching"] == [2, 2, 1, 1] and r["nodes"] == 14
    assert r["verify_ms"] == pytest.approx(curve.ms(15)) and r["decode_ms"] == pytest.approx(curve.ms(1))
    assert r["draft_ms"] == pytest.approx(4 * 0.1 * curve.ms(1))
    assert r["expected_tokens"] == pytest.approx(tree_expected_tokens([2, 2, 1, 1], 0.6))
    assert "measured:" in panel.html.value and "2, 2, 1, 1" in panel.html.value
    panel.controls["hardware"].value = H100
    assert panel.result["verify_ms"] == pytest.approx(tree_report(2, 4, 0.6, 0.1, branching=[2, 2, 1, 1])["verify_ms"])
    panel.controls["branching"].value = ""  # back to width x depth
    assert panel.result["branching"] == [2, 2, 2, 2]
    with pytest.raises(ValueError, match="comma-separated"):
        parse_branching("2;2")


def test_tree_panel_hit_model_is_the_measured_profile_and_the_slider_scales_it():
    profile = load_profile("small-model")
    if profile is None:
        pytest.skip("no models/tuned/small-model.json")
    top1 = profile.reach([1])[0]
    measured = tree_report(2, 4, top1, branching=[2, 2, 1, 1], profile=profile)
    assert measured["reach"] == pytest.approx(profile.reach([2, 2, 1, 1]))
    panel = tree_panel(branching="2,2,1,1")  # defaults: the small draft's profile, the recorded cost curve
    assert panel.result["hit_rate"] == pytest.approx(top1, abs=0.005)
    assert "measured rank profile of small-model" in panel.html.value and "measured:" in panel.html.value
    panel.controls["hit_rate"].value = round(top1 / 2, 2)  # every level's pass rate halved
    halved = panel.result["reach"]
    assert halved[0] == pytest.approx(measured["reach"][0] * round(top1 / 2, 2) / top1)
    assert halved[-1] < measured["reach"][-1] / 8
    # width buys what the measured ranks say, far less than independent candidates at the same top-1 rate
    iid = tree_report(4, 1, top1)["expected_tokens"]
    assert tree_report(4, 1, top1, profile=profile)["expected_tokens"] < iid - 0.1


@pytest.mark.slow
def test_measured_profile_predicts_tokens_per_pass_of_the_small_draft_within_10_percent(target_model, tokenizer):
    """Fed the small draft's measured rank profile, the tree widget's hit model predicts
    the tokens per verify pass that tree decoding with [2, 2, 1, 1] measures within 10 %, on the held-out prompts the
    profile was measured on, over twice as many tokens. (Other held-out files differ in the small draft's acceptance
    itself: 15-20 % fewer tokens per pass on the benchmark's 8 and on the tuner's validation 8 than on these.)"""
    profile = load_profile("small-model")
    if profile is None:
        pytest.skip("no models/tuned/small-model.json")
    command = load_tuned("small-model")["command"]  # its profile prompts: the first --prompts of the tuner's prompts
    n_profile, n_validate = (int(re.search(rf"--{flag} (\d+)", command).group(1)) for flag in ("prompts", "validate-prompts"))
    predicted = tree_report(2, 4, profile.reach([1])[0], branching=[2, 2, 1, 1], profile=profile)["expected_tokens"]
    drafter = ModelDrafter(load_model("tiny-qwen3-draft"))
    accepted = passes = 0
    for prompt in tuning_prompts(tokenizer, n_profile, n_validate)[0]:
        out = tree_speculative_generate(target_model, drafter, prompt, 96, branching=[2, 2, 1, 1])
        full = out.accepted_per_call[:-4]  # a pass drafts fewer levels only when < 5 tokens remain: the last <= 4
        accepted += sum(full)
        passes += len(full)
    measured = 1 + accepted / passes
    print(f"tokens per pass: predicted {predicted:.3f}, measured {measured:.3f} over {passes} passes")
    assert abs(predicted - measured) / measured < 0.10


def test_batch_panel_reproduces_the_h100_roofline_rows():
    table = {row.batch: row for row in speedup_table()}
    panel = batch_panel()
    for batch in (1, 64, 256):
        panel.controls["batch"].value = batch
        assert panel.result["speedup"] == pytest.approx(table[batch].speedup)
        assert panel.result["verify_ms"] == pytest.approx(table[batch].verify_ms)
    assert panel.result["speedup"] < 1 and "SLOWER" in panel.html.value  # batch 256: 0.90x
    assert panel.result["compute_bound"]


def test_readme_reference_figures_are_the_ones_the_code_uses():
    """The README's Reference figures table states the H100 batch table and the Qwen3-0.6B run as the code has them,
    and labels the H100 figures as a model with their assumed inputs."""
    import re

    from tree_spec.analysis.experiment import REFERENCE
    from tree_spec.analysis.speedup import Roofline

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Reference figures", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| H100 batch table (a model) |"))
    inputs = next(line for line in section.splitlines()
                  if line.startswith("| H100 roofline model inputs (public and assumed) |"))
    hw = Roofline()
    assert f"{hw.efficiency:.0%}".replace("%", " % efficiency") in inputs and f"{hw.fixed_s * 1e3:.1f} ms" in inputs
    assert "Assumed round numbers" in inputs and "not a measurement" in row
    numbers = lambda label: [float(x) for x in re.search(label + r" ([\d./ ]+)", row).group(1).split(" / ")]
    table = speedup_table()
    assert numbers("batch") == [r.batch for r in table]
    assert numbers("decode step") == [round(r.decode_ms, 2) for r in table]
    assert numbers(r"verify step \(5 tokens per sequence\)") == [round(r.verify_ms, 2) for r in table]
    assert numbers("speedup") == [round(r.speedup, 2) for r in table]
    run = next(line for line in section.splitlines() if line.startswith("| Qwen3-0.6B chain vs tree |"))
    for name in ("chain", "tree"):
        ref = REFERENCE[name]
        assert f"{ref['nodes']} " in run and f"{ref['target_calls']} " in run and f"τ = {ref['tau']:.2f}" in run


def test_break_even_alpha_rises_with_batch():
    evens = [batch_report(b)["break_even_alpha"] for b in (1, 16, 64, 128, 256)]
    assert evens[0] == pytest.approx(evens[1])  # both memory-bound: verifying k + 1 tokens is free
    assert evens[1] < evens[2] < evens[3] < evens[4]  # compute-bound: every extra token costs
    assert expected_tokens_per_verify(evens[0], 4) == pytest.approx(1 + 4 * 0.05, abs=1e-9)


def test_tree_viewer_shows_the_real_accepted_path(target_model, tokenizer):
    prompt = tokenizer.encode("def add(a, b):\n    return a + b\n\n\ndef ")
    drafter = QuantizedSelfDrafter(target_model, bits=4)
    panel = tree_viewer_panel(target_model, drafter, tokenizer, {"add": prompt}, max_step=8, width=2, depth=3)
    panel.controls["step"].value = 3
    panel.controls["width"].value = 3
    r = panel.result
    assert len(r["tokens"]) == 1 + tree_node_count([3, 3, 3])
    greedy = generate(target_model, torch.tensor([prompt], device="cpu"), 3 + 1 + 3 + 1)[0].tolist()
    # the accepted path plus the target's token continue plain greedy decoding exactly
    accepted = [r["tokens"][i] for i in r["path"]] + [r["next_token"]]
    assert accepted == greedy[3:3 + len(accepted)]
    assert "accepted" in panel.html.value


def test_every_tree_viewer_control_changes_text_and_plot(target_model, tokenizer):
    prompts = {"add": tokenizer.encode("def add(a, b):\n    return a + b\n\n\ndef "),
               "main": tokenizer.encode("def main():\n    return")}
    panel = tree_viewer_panel(target_model, target_model, tokenizer, prompts, max_step=6, width=2, depth=3)
    every_control_changes_what_is_shown(panel, {"prompt": "main", "step": 3, "width": 3, "depth": 2})


def test_inspect_tree_step_accepts_nothing_from_a_useless_tree(target_model, tokenizer):
    context = tokenizer.encode("import os\nimport ")
    root = int(generate(target_model, torch.tensor([context], device="cpu"), 1)[0, 0])

    class Wrong(QuantizedSelfDrafter):
        def next_logits(self, context, tokens, parents, frontier):
            logits = super().next_logits(context, tokens, parents, frontier)
            return -logits  # propose the least likely tokens

    r = inspect_tree_step(target_model, Wrong(target_model), context, root, [2, 2])
    assert r["path"] == [0]
    assert r["next_token"] == int(generate(target_model, torch.tensor([context + [root]], device="cpu"), 1)[0, 0])


def test_drawings_have_one_box_per_node():
    parents = [-1, 0, 0, 1, 1, 2]
    fig = draw_tree(parents, accepted=[0, 1, 4])
    assert len(fig.axes[0].texts) == len(parents)
    fig = draw_mask(parents)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (6, 6) and int(image.sum()) == 14  # each node sees itself + ancestors: 1+2+2+3+3+3


def test_jupyterlab_has_the_widget_extension():
    """Opening a notebook in JupyterLab renders the panels: the ipywidgets lab extension is installed."""
    from jupyter_core.paths import jupyter_path

    found = [Path(d) / "@jupyter-widgets" / "jupyterlab-manager" / "package.json" for d in jupyter_path("labextensions")]
    assert any(p.exists() for p in found), f"pip install -r requirements.txt (jupyterlab_widgets); looked in {found}"


# ---------------------------------------------------------------- Panel: snapshot for static viewers, errors shown

def test_panel_shows_a_static_snapshot_next_to_the_live_widget():
    import ipywidgets

    from tree_spec.ui.chain_panel import speedup_panel

    panel = speedup_panel(alpha=0.8, k=4, c=0.05)
    bundle = panel._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == panel.model_id  # the live widget
    assert "children=" not in bundle["text/plain"] and "alpha = 0.8, k = 4, c = 0.05" in bundle["text/plain"]
    snapshot = bundle["text/html"]
    assert "alpha = 0.8, k = 4" in snapshot and panel.html.value in snapshot
    assert snapshot.count('<img src="data:image/png;base64,') == 1
    panel.controls["k"].value = 7
    moved = panel._repr_mimebundle_()["text/html"]
    assert "k = 7" in moved and panel.html.value in moved and moved != snapshot
    plain = ipywidgets.IntSlider(3)._repr_mimebundle_()  # other widgets are left alone
    assert "text/html" not in plain


def test_panel_shows_a_failing_callback_instead_of_freezing():
    import ipywidgets

    from tree_spec.ui.panel import Panel

    def compute(x: int) -> dict:
        if x == 3:
            raise ValueError("three is not allowed")
        return {"x": x}

    panel = Panel({"x": ipywidgets.IntSlider(1, 0, 5)}, compute, lambda r: f"x is {r['x']}", None)
    assert panel.html.value == "x is 1" and panel.error is None
    panel.controls["x"].value = 3  # the callback raises: shown in the panel, not lost in the kernel log
    assert isinstance(panel.error, ValueError) and "three is not allowed" in panel.html.value
    assert "x = 3" in panel.html.value and panel.result == {"x": 1}
    assert "three is not allowed" in panel._repr_mimebundle_()["text/html"]
    panel.controls["x"].value = 2
    assert panel.error is None and panel.html.value == "x is 2"
    with pytest.raises(ValueError, match="three"):  # a panel whose defaults fail is a bug: the cell fails
        Panel({"x": ipywidgets.IntSlider(3, 0, 5)}, compute, lambda r: "", None)


def test_tree_step_summary_reads_naturally_when_nothing_is_accepted():
    from tree_spec.ui.tree_viewer import tree_step_summary

    none = tree_step_summary(14, [], "x")
    assert none == "14 drafted nodes, none accepted: the target's own token is <code>x</code>"
    some = tree_step_summary(6, ["de", "f"], " f")
    assert some == "6 drafted nodes, 2 accepted: <code>def</code>, then the target's token <code> f</code>"
