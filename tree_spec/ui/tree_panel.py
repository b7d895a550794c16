"""The tree panel: a branching shape's predicted speedup under a hit model (i.i.d. candidates or a measured rank
profile) and a hardware model (the H100 roofline or a measured cost curve).

A forward pass costs `roofline_step_time` (memory roof vs compute roof, every verified token counted), so wide or
deep trees and large batches pay for the tokens they verify; or a measured `CostCurve`. Drafting costs
`draft_cost` decode steps per draft level (one draft forward per level, the whole frontier in it).
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from functools import partial

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from ..analysis.curve import COSTS_DIR, CostCurve
from ..analysis.ranks import RankProfile
from ..analysis.speedup import Roofline, roofline_step_time, tree_verify_tokens
from ..analysis.tuned import load_profile, load_tuned
from ..core.topology import tree_node_count
from .panel import SPEEDUP_CMAP, Panel, slider, verdict

IID, MEASURED = "i.i.d. candidates", "measured rank profile"
MEASURED_CURVE, H100 = "measured cost curve", "H100 roofline (7B model)"
MAX_WIDTH, MAX_DEPTH = 6, 8  # the sliders' and the map's range


def parse_branching(text: str | Sequence[int] | None) -> list[int] | None:
    """"2, 2, 1, 1" or [2, 2, 1, 1] -> [2, 2, 1, 1]; None or "" -> None. Raises ValueError on anything else."""
    if text is None:
        return None
    if isinstance(text, str):
        parts = [p for p in text.replace(" ", "").strip("[]").split(",") if p]
        if not parts:
            return None
        if not all(p.isdigit() for p in parts):
            raise ValueError(f"branching must be comma-separated widths like 2,2,1,1, got {text!r}")
        text = [int(p) for p in parts]
    shape = [int(w) for w in text]
    tree_node_count(shape)  # validates the widths
    return shape or None


def tree_hit_reach(branching: Sequence[int], hit_rate: float, profile: RankProfile | None = None) -> tuple[list[float], str]:
    """P(depths 1..d all accepted) for d = 1..len(branching), and the hit model's description.

    profile None (i.i.d.): each of the w_d candidates under the accepted node matches independently with
    probability hit_rate (`tree_expected_tokens`; overstates width: the candidates are alternatives of one
    distribution). With a profile: the measured reach of this branching (`RankProfile.reach`: a level passes
    when the target's token is among the draft's top-w_d, correlations between depths kept, averaged over the
    positions a decoder with this branching visits), every level's pass rate scaled by hit_rate / (the
    profile's measured top-1 rate of a one-token chain), capped at 1; hit_rate equal to that rate gives the
    measurement itself.
    """
    if not 0 <= hit_rate <= 1:
        raise ValueError(f"hit_rate must be in [0, 1], got {hit_rate}")
    if profile is None:
        reach, r = [], 1.0
        for w in branching:
            r *= 1 - (1 - hit_rate) ** w
            reach.append(r)
        return reach, f"{IID}: each candidate hits independently with probability {hit_rate:.2f}"
    measured = profile.reach(branching)
    top1 = profile.reach([1])[0]
    scale = hit_rate / top1 if top1 else 0.0
    reach, r, before = [], 1.0, 1.0
    for m in measured:
        r *= min(1.0, scale * (m / before if before else 0.0))
        before = m
        reach.append(r)
    return reach, (f"{MEASURED} of {profile.drafter} ({profile.positions} positions of the target's greedy text, "
                   f"averaged over those a decoder with this branching visits; measured top-1 rate {top1:.3f}), "
                   f"level pass rates scaled ×{scale:.2f} by the hit-rate slider")


def tree_report(
    width: int, depth: int, hit_rate: float, draft_cost: float = 0.05, batch: int = 1,
    context: int = 1024, hw: Roofline = Roofline(), branching: Sequence[int] | str | None = None,
    profile: RankProfile | None = None, curve: CostCurve | None = None,
) -> dict:
    """A tree (`branching`, or `width` children per node for `depth` levels) per verify step.

    Hit model (`tree_hit_reach`): i.i.d. candidates at `hit_rate`, or a measured rank profile scaled by it.
    Hardware: the roofline of `hw` (H100) at `context` cached tokens, or a measured CostCurve (it names its machine)
    (curve given): verify = curve.ms(batch * (nodes + 1)), decode = curve.ms(batch): on a CPU a batch of
    sequences costs about one forward over all their tokens (an approximation; the curve is measured at batch 1).
    expected_tokens = 1 + Σ reach (tokens per verify, the target's own token counted); draft_ms = levels ·
    draft_cost decode steps; speedup = expected_tokens · decode_ms / (verify_ms + draft_ms); chain_speedup:
    the same hit model and costs for a chain as deep.
    """
    shape = parse_branching(branching) or [width] * depth

    def step_seconds(tokens: int) -> float:
        if curve is not None:
            return curve.ms(batch * tokens) / 1000
        return roofline_step_time(batch, tokens, context, hw)

    decode = step_seconds(1)

    def speedup(sh: list[int]) -> tuple[float, float, list[float], str]:
        reach, model = tree_hit_reach(sh, hit_rate, profile)
        verify = step_seconds(tree_node_count(sh) + 1)
        return verify, (1 + sum(reach)) * decode / (verify + len(sh) * draft_cost * decode), reach, model

    verify, tree_speedup, reach, model = speedup(shape)
    _, chain, _, _ = speedup([1] * len(shape))
    return dict(
        width=width, depth=len(shape), hit_rate=hit_rate, draft_cost=draft_cost, batch=batch,
        branching=shape, nodes=tree_node_count(shape), verify_tokens=tree_verify_tokens(shape, batch),
        reach=reach, expected_tokens=1 + sum(reach), hit_model=model,
        hardware=f"measured: {curve.summary()}" if curve is not None else H100,
        decode_ms=decode * 1e3, verify_ms=verify * 1e3,
        draft_ms=len(shape) * draft_cost * decode * 1e3, speedup=tree_speedup, chain_speedup=chain,
    )


def _render_tree(r: dict) -> str:
    reach = ", ".join(f"{x:.2f}" for x in r["reach"])
    return (
        f"branching {r['branching']}: {r['nodes']} draft nodes, {r['verify_tokens']} tokens to verify "
        f"(batch {r['batch']})<br>hit model: {html.escape(r['hit_model'])}<br>hardware: {html.escape(r['hardware'])}"
        f"<br>P(depth d accepted), d = 1..{r['depth']}: {reach} &nbsp;·&nbsp; expected tokens per step "
        f"{r['expected_tokens']:.2f}<br>decode step {r['decode_ms']:.2f} ms, verify step {r['verify_ms']:.2f} ms, "
        f"drafting {r['draft_ms']:.2f} ms &nbsp;·&nbsp; a chain of the same depth: {r['chain_speedup']:.2f}×"
        f"<br>{verdict(r['speedup'])}"
    )


def full_tree_text(width: int, depth: int) -> str:
    """The branching box's text for a full tree: full_tree_text(2, 4) == "2,2,2,2"."""
    return ",".join([str(width)] * depth)


def tree_panel_report(
    branching: str, width: int, depth: int, hit_rate: float, draft_cost: float, batch: int, hit_model: str,
    hardware: str, profile: RankProfile | None = None, curve: CostCurve | None = None,
) -> dict:
    """The tree panel's callback: the controls' values -> tree_report.

    The branching box is the shape (the width and depth sliders write it, `_link_shape`); an empty box means
    width x depth. custom: the shape is not the full tree the sliders describe (then the map marks no cell).
    """
    profile = profile if hit_model == MEASURED else None
    curve = curve if hardware == MEASURED_CURVE else None
    r = tree_report(width, depth, hit_rate, draft_cost, batch, branching=branching, profile=profile, curve=curve)
    r.update(profile=profile, curve=curve, custom=r["branching"] != [width] * depth, given_width=width,
             given_depth=depth)
    return r


def _link_shape(change: dict, controls: dict, profile_depth: int | None = None) -> None:
    """One source of truth for the shape: moving the width or depth slider writes the branching box.

    A measured rank profile covers depths 1..profile_depth: with that hit model the depth slider stops there.
    """
    width, depth, box = controls["width"], controls["depth"], controls["branching"]
    if change["owner"] is controls["hit_model"] and profile_depth is not None:
        full = box.value == full_tree_text(width.value, depth.value)
        depth.max = profile_depth if change["new"] == MEASURED else MAX_DEPTH  # clamps the value
        if full:
            box.value = full_tree_text(width.value, depth.value)
    elif change["owner"] in (width, depth):
        box.value = full_tree_text(width.value, depth.value)


def _draw_tree(r: dict) -> Figure:
    profile = r.get("profile")
    max_depth = min(MAX_DEPTH, profile.depth) if profile is not None else MAX_DEPTH
    max_width = min(MAX_WIDTH, profile.max_rank) if profile is not None else MAX_WIDTH
    widths, depths = np.arange(1, max_width + 1), np.arange(1, max_depth + 1)
    grid = np.array([[tree_report(w, d, r["hit_rate"], r["draft_cost"], r["batch"], profile=profile,
                                  curve=r.get("curve"))["speedup"] for w in widths] for d in depths])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    norm = TwoSlopeNorm(1.0, vmin=min(grid.min(), 0.99), vmax=max(grid.max(), 1.01))  # white at 1x, blue faster
    extent = (0.5, max_width + 0.5, 0.5, max_depth + 0.5)
    image = ax.imshow(grid, origin="lower", cmap=SPEEDUP_CMAP, norm=norm, extent=extent, aspect="auto")
    if grid.min() < 1 < grid.max():
        ax.contour(widths, depths, grid, levels=[1.0], colors="k", linewidths=1.5)
    if not r.get("custom"):
        ax.plot([r["width"]], [r["depth"]], "o", ms=12, mfc="none", mec="k", mew=2)
    fig.colorbar(image, ax=ax, label="speedup (black line: 1×)")
    where = f"model, costs measured on {r['curve'].hardware}" if r.get("curve") is not None else "H100 roofline model"
    model = f"profile of {profile.drafter} ×{r['hit_rate'] / profile.reach([1])[0]:.2f}" if profile is not None \
        else f"i.i.d. hit rate {r['hit_rate']:.2f}"
    shown = f"; your branching {r['branching']}: {r['speedup']:.2f}×" if r.get("custom") else ""
    ax.set(xlabel="width (children per node, full trees)", ylabel="depth (levels)",
           title=f"{where}, {model}, batch {r['batch']}, draft cost {r['draft_cost']:.2f}{shown}")
    ax.title.set_fontsize(9)
    fig.tight_layout()
    return fig


def tree_panel(
    width: int = 2, depth: int = 4, hit_rate: float | None = None, draft_cost: float | None = None, batch: int = 1,
    branching: str = "", hit_model: str = MEASURED, hardware: str = MEASURED_CURVE, profile: RankProfile | None = None,
    curve: CostCurve | None = None,
) -> Panel:
    """A branching text box ("2,2,1,1"), width and depth sliders, hit rate, draft cost, batch, hit model,
    hardware -> tree_panel_report, with a speedup map over full trees of width x depth.

    The box is the shape: it starts as `branching` or, when that is empty, the full tree width x depth;
    typing any shape there ("3,2,1") evaluates it; moving the width or depth slider rewrites it as the full
    tree the sliders show ("3,3,3,3"), marked on the map.

    Defaults: the shipped small draft's measured rank profile (models/tuned/small-model.json), the cost curve
    recorded on the course's machine (models/costs/tiny-qwen3.json; pass `curve=` to use one measured here),
    hit rate = the profile's measured depth-1 top-1 rate (the measurement unscaled), draft cost = the small
    draft's measured ms per level / decode step. Without those
    files: i.i.d. candidates, the H100 roofline, hit rate 0.6, draft cost 0.05.
    """
    profile = profile if profile is not None else load_profile("small-model")
    if curve is None and (COSTS_DIR / "tiny-qwen3.json").is_file():
        curve = CostCurve.from_json(COSTS_DIR / "tiny-qwen3.json")
    hit_model = hit_model if profile is not None else IID
    hardware = hardware if curve is not None else H100
    if hit_rate is None:
        hit_rate = round(profile.reach([1])[0], 2) if profile is not None and hit_model == MEASURED else 0.6
    if draft_cost is None:
        tuned = load_tuned("small-model")
        draft_cost = 0.05
        if tuned is not None and hardware == MEASURED_CURVE:
            measured = tuned["costs"]["draft_ms"] + tuned["costs"]["draft_per_node_ms"]
            draft_cost = round(measured / CostCurve.from_dict(tuned["cost_curve"]).decode_ms, 2)
    profile_depth = profile.depth if profile is not None else None
    depth_max = profile_depth if hit_model == MEASURED and profile_depth is not None else MAX_DEPTH
    controls = {
        "branching": widgets.Text(branching or full_tree_text(width, min(depth, depth_max)),
                                  description="branching (shape)",
                                  placeholder="e.g. 2,2,1,1; the width and depth sliders write it",
                                  style={"description_width": "170px"}, layout=widgets.Layout(width="480px")),
        "width": slider("width (children/node)", width, 1, MAX_WIDTH, 1),
        "depth": slider("depth (levels)", min(depth, depth_max), 1, depth_max, 1),
        "hit_rate": slider("draft hit rate", hit_rate, 0.0, 1.0, 0.01),
        "draft_cost": slider("draft cost / level", draft_cost, 0.0, 1.0, 0.01),
        "batch": slider("batch size", batch, 1, 256, 1),
        "hit_model": widgets.Dropdown(options=[MEASURED, IID] if profile is not None else [IID], value=hit_model,
                                      description="hit model", style={"description_width": "170px"}),
        "hardware": widgets.Dropdown(options=[MEASURED_CURVE, H100] if curve is not None else [H100], value=hardware,
                                     description="hardware", style={"description_width": "170px"}),
    }
    return Panel(controls, partial(tree_panel_report, profile=profile, curve=curve), _render_tree, _draw_tree,
                 link=partial(_link_shape, profile_depth=profile_depth))
