"""Interactive panels for the notebooks: sliders wired to plain functions.

Each `*_report(...)` is a plain function (testable without a browser) returning a dict of numbers;
each `*_panel()` builds an ipywidgets `Panel` whose sliders call that function on every change and
show the result as text and a plot. Tests drive a panel by setting `panel.controls[name].value` and
reading `panel.result`.

Cost model of the tree and batch panels: a forward pass costs `roofline_step_time` (memory roof vs
compute roof, every verified token counted), so wide or deep trees and large batches pay for the
tokens they verify; the tree panel can instead use a measured cost curve
(`tree_spec.costs.CostCurve`). Drafting costs `draft_cost` decode steps per draft level (one draft
forward per level, the whole frontier in it).
"""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence
from functools import partial

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import clear_output, display
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from mini_llm import Transformer, generate

from .costs import COSTS_DIR, CostCurve
from .drafters import Drafter, as_drafter
from .plots import draw_tree

from .speedup import (
    Roofline,
    expected_speedup,
    expected_tokens_per_verify,
    roofline_step_time,
    tree_node_count,
    tree_verify_tokens,
    wall_time_per_token,
)
from .topology import positions, tree_mask
from .tree import accept_greedy, build_draft_tree, target_forward
from .tune import RankProfile, load_profile, load_tuned

FASTER, SLOWER = "#1a7f37", "#cf222e"


class Panel(widgets.VBox):
    """Sliders, a text view and a plot; `compute(**slider values)` reruns on every change.

    controls: name -> slider (the keyword `compute` receives); result: the last `compute` output;
    html: the rendered text; plot: where `draw(result)` shows its figure; error: the exception of the
    last update, None when it worked (it is shown in the panel: a slider callback's exception would
    otherwise only reach the kernel's log, and the panel would look frozen).

    Displayed, a panel is the live widget plus a static snapshot (`snapshot_html`: the control values,
    the text and the plot as an inline PNG) for viewers that cannot run widgets: an untrusted or not
    yet executed notebook in JupyterLab, GitHub, nbviewer.
    """

    def __init__(
        self,
        controls: dict[str, widgets.ValueWidget],
        compute: Callable[..., dict],
        render: Callable[[dict], str],
        draw: Callable[[dict], Figure] | None = None,
    ):
        self.controls, self._compute, self._render, self._draw = controls, compute, render, draw
        self.html, self.plot = widgets.HTML(), widgets.Output()
        self.result: dict = {}
        self.error: Exception | None = None
        super().__init__([widgets.VBox(list(controls.values())), self.html, self.plot])
        self.add_class("tree-spec-panel")  # how the browser test finds the panels
        for control in controls.values():
            control.observe(self.update, names="value")
        self.update()
        if self.error is not None:  # a panel that cannot show its defaults is a bug: fail the cell
            raise self.error

    def values(self) -> dict:
        """The controls' current values, by name (the keywords `compute` receives)."""
        return {name: c.value for name, c in self.controls.items()}

    def update(self, change: dict | None = None) -> None:
        """Recompute from the current slider values, re-render the text and redraw the plot.

        If compute, render or draw raises, the panel shows the error (and keeps the last plot) instead.
        """
        try:
            result = self._compute(**self.values())
            text = self._render(result)
            fig = self._draw(result) if self._draw is not None else None
        except Exception as error:  # noqa: BLE001 - shown to the learner, kept in self.error
            self.error = error
            self.html.value = (
                f'<b style="color:{SLOWER}">this setting failed: {html.escape(type(error).__name__)}: '
                f"{html.escape(str(error))}</b><br>(values: {html.escape(_describe(self.values()))})"
            )
            return
        self.error, self.result, self.html.value = None, result, text
        if fig is not None:
            with self.plot:
                clear_output(wait=True)
                display(fig)
                plt.close(fig)

    def snapshot_html(self, dpi: int = 72) -> str:
        """The panel as static HTML: the control values, the rendered text and the plot (inline PNG)."""
        image = ""
        if self._draw is not None and self.error is None:
            fig = self._draw(self.result)
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
            plt.close(fig)
            image = f'<img src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}" alt="plot">'
        return (
            f'<div class="tree-spec-panel-snapshot"><p><i>Static snapshot (run the notebook for live sliders):</i> '
            f"{html.escape(_describe(self.values()))}</p><div>{self.html.value}</div>{image}</div>"
        )

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The widget view, plus text/html and text/plain snapshots for viewers without live widgets."""
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"{type(self).__name__}: {_describe(self.values())} (run the notebook for live sliders)"
        bundle["text/html"] = self.snapshot_html()
        return bundle


def _describe(values: dict) -> str:
    """{"alpha": 0.8, "k": 4, "branching": ""} -> "alpha = 0.8, k = 4, branching = (none)" (floats with at most
    4 significant digits; an empty text box reads "(none)")."""
    shown = {name: "(none)" if value == "" else value for name, value in values.items()}
    return ", ".join(f"{name} = {value:.4g}" if isinstance(value, float) else f"{name} = {value}"
                     for name, value in shown.items())


def _slider(description: str, value: float, lo: float, hi: float, step: float) -> widgets.ValueWidget:
    style = {"description_width": "170px"}
    layout = widgets.Layout(width="480px")
    if isinstance(step, int) and isinstance(value, int):
        return widgets.IntSlider(value, lo, hi, step, description=description, style=style, layout=layout)
    return widgets.FloatSlider(value, min=lo, max=hi, step=step, description=description, style=style, layout=layout,
                               readout_format=".2f")


def _verdict(speedup: float) -> str:
    if speedup >= 1:
        return f'<b style="color:{FASTER}">speedup {speedup:.2f}× — faster than plain decoding</b>'
    return f'<b style="color:{SLOWER}">speedup {speedup:.2f}× — SLOWER than plain decoding</b>'


# ---------------------------------------------------------------- chain: alpha, k, draft cost

def chain_break_even_alpha(k: int, c: float) -> float | None:
    """The per-position alpha at which expected_speedup(alpha, k, c) = 1, i.e. E(alpha, k) = k * c + 1;
    None if c >= 1. (In acceptance-ratio units the same point is c, from 1 + k * ratio = k * c + 1.)

    E rises monotonically from 1 (alpha = 0) to k + 1 (alpha = 1), so bisection finds the root.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if c >= 1:
        return None
    return _break_even(lambda alpha: expected_speedup(alpha, k, c))


def _break_even(speedup: Callable[[float], float]) -> float | None:
    """The alpha in [0, 1] where a speedup that rises with alpha reaches 1 (bisection); None if it never does."""
    if speedup(1.0) < 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if speedup(mid) < 1 else (lo, mid)
    return (lo + hi) / 2


def speedup_report(alpha: float, k: int, c: float) -> dict:
    """Chain speculation at acceptance alpha, k drafts per step, draft cost c (one draft token / one target pass).

    -> tokens_per_verify E = (1 - alpha^(k+1)) / (1 - alpha), wall_time_per_token = (k c + 1) / E
    (in target passes), speedup = E / (k c + 1), break_even_alpha (speedup = 1; None if c >= 1).
    """
    return dict(
        alpha=alpha, k=k, c=c,
        tokens_per_verify=expected_tokens_per_verify(alpha, k),
        wall_time_per_token=wall_time_per_token(alpha, k, c),
        speedup=expected_speedup(alpha, k, c),
        break_even_alpha=chain_break_even_alpha(k, c),
    )


def _render_speedup(r: dict) -> str:
    even = "none (a draft token costs as much as a target pass)" if r["break_even_alpha"] is None \
        else f"{r['break_even_alpha']:.3f}"
    return (
        f"tokens per verify E = {r['tokens_per_verify']:.2f} &nbsp;·&nbsp; wall time per token = "
        f"{r['wall_time_per_token']:.3f} target passes &nbsp;·&nbsp; break-even per-position α = {even}<br>"
        f"{_verdict(r['speedup'])}"
    )


def _draw_speedup(r: dict) -> Figure:
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    alphas = np.linspace(0, 0.99, 100)
    for k in range(1, 9):
        bold = k == r["k"]
        ax.plot(alphas, [expected_speedup(a, k, r["c"]) for a in alphas], lw=2.5 if bold else 0.8,
                color="C0" if bold else "0.7", label=f"k = {k}" if bold else None, zorder=3 if bold else 1)
    ax.axhline(1, color=SLOWER, lw=1, ls="--", label="plain decoding")
    ax.plot([r["alpha"]], [r["speedup"]], "o", color="C1", zorder=4, label="you are here")
    ax.set(xlabel="acceptance rate α", ylabel="speedup", title=f"chain speculation, draft cost c = {r['c']:.2f}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def speedup_panel(alpha: float = 0.8, k: int = 4, c: float = 0.05) -> Panel:
    """Sliders α, k, c -> speedup_report, with speedup vs α for k = 1..8 (the chosen k bold)."""
    controls = {
        "alpha": _slider("acceptance rate α", alpha, 0.0, 0.99, 0.01),
        "k": _slider("draft tokens k", k, 1, 8, 1),
        "c": _slider("draft cost c", c, 0.0, 1.0, 0.01),
    }
    return Panel(controls, speedup_report, _render_speedup, _draw_speedup)


# ---------------------------------------------------------------- trees: shape, hit model, hardware, draft cost, batch

IID, MEASURED = "i.i.d. candidates", "measured rank profile"
MEASURED_CURVE, H100 = "measured cost curve", "H100 roofline (7B model)"


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
        f"<br>{_verdict(r['speedup'])}"
    )


def tree_panel_report(
    branching: str, width: int, depth: int, hit_rate: float, draft_cost: float, batch: int, hit_model: str,
    hardware: str, profile: RankProfile | None = None, curve: CostCurve | None = None,
) -> dict:
    """The tree panel's callback: the controls' values -> tree_report (branching text overrides width x depth)."""
    r = tree_report(width, depth, hit_rate, draft_cost, batch, branching=branching,
                    profile=profile if hit_model == MEASURED else None, curve=curve if hardware == MEASURED_CURVE else None)
    r.update(profile=r and (profile if hit_model == MEASURED else None), curve=curve if hardware == MEASURED_CURVE else None,
             custom=parse_branching(branching) is not None, given_width=width, given_depth=depth)
    return r


def _draw_tree(r: dict) -> Figure:
    profile = r.get("profile")
    max_depth = min(8, profile.depth) if profile is not None else 8
    max_width = min(6, profile.max_rank) if profile is not None else 6
    widths, depths = np.arange(1, max_width + 1), np.arange(1, max_depth + 1)
    grid = np.array([[tree_report(w, d, r["hit_rate"], r["draft_cost"], r["batch"], profile=profile,
                                  curve=r.get("curve"))["speedup"] for w in widths] for d in depths])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    norm = TwoSlopeNorm(1.0, vmin=min(grid.min(), 0.99), vmax=max(grid.max(), 1.01))  # white at 1x
    extent = (0.5, max_width + 0.5, 0.5, max_depth + 0.5)
    image = ax.imshow(grid, origin="lower", cmap="RdYlGn", norm=norm, extent=extent, aspect="auto")
    if grid.min() < 1 < grid.max():
        ax.contour(widths, depths, grid, levels=[1.0], colors="k", linewidths=1.5)
    if not r.get("custom"):
        ax.plot([r["width"]], [r["depth"]], "o", ms=12, mfc="none", mec="k", mew=2)
    fig.colorbar(image, ax=ax, label="speedup (black line: 1×)")
    where = f"measured on {r['curve'].hardware}" if r.get("curve") is not None else "H100 roofline"
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
    """A branching text box ("2,2,1,1"; empty: width x depth sliders), hit rate, draft cost, batch, hit model,
    hardware -> tree_panel_report, with a speedup map over full trees of width x depth.

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
    controls = {
        "branching": widgets.Text(branching, description="branching", placeholder="e.g. 2,2,1,1 (empty: width x depth)",
                                  style={"description_width": "170px"}, layout=widgets.Layout(width="480px")),
        "width": _slider("width (children/node)", width, 1, 6, 1),
        "depth": _slider("depth (levels)", depth, 1, 8, 1),
        "hit_rate": _slider("draft hit rate", hit_rate, 0.0, 1.0, 0.01),
        "draft_cost": _slider("draft cost / level", draft_cost, 0.0, 1.0, 0.01),
        "batch": _slider("batch size", batch, 1, 256, 1),
        "hit_model": widgets.Dropdown(options=[MEASURED, IID] if profile is not None else [IID], value=hit_model,
                                      description="hit model", style={"description_width": "170px"}),
        "hardware": widgets.Dropdown(options=[MEASURED_CURVE, H100] if curve is not None else [H100], value=hardware,
                                     description="hardware", style={"description_width": "170px"}),
    }
    return Panel(controls, partial(tree_panel_report, profile=profile, curve=curve), _render_tree, _draw_tree)


# ---------------------------------------------------------------- batch size on the roofline

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def batch_report(
    batch: int, alpha: float = 0.8, k: int = 4, draft_cost: float = 0.05, context: int = 1024, hw: Roofline = Roofline()
) -> dict:
    """Chain speculation at one batch size on the roofline model (the chapter's table, one row).

    decode_ms: a step with 1 token per sequence; verify_ms: k + 1 tokens per sequence;
    speedup = E * decode / (verify + k * draft_cost * decode); break_even_alpha: the per-position alpha (of
    E(alpha, k)) where that speedup is 1 at this batch (None if even alpha = 1 does not pay). The card's
    break-even acceptance ratio at the same point is tree_spec.speedup.break_even_alpha(overhead, k).
    """
    decode = roofline_step_time(batch, 1, context, hw)
    verify = roofline_step_time(batch, k + 1, context, hw)
    cost = verify + k * draft_cost * decode

    def speedup(a: float) -> float:
        return expected_tokens_per_verify(a, k) * decode / cost

    return dict(batch=batch, alpha=alpha, k=k, draft_cost=draft_cost, decode_ms=decode * 1e3, verify_ms=verify * 1e3,
                speedup=speedup(alpha), break_even_alpha=_break_even(speedup),
                compute_bound=verify - hw.fixed_s > (hw.weight_bytes + batch * context * hw.kv_bytes_per_token) / hw.bandwidth)


def _render_batch(r: dict) -> str:
    even = "none (α = 1 still does not pay)" if r["break_even_alpha"] is None else f"{r['break_even_alpha']:.3f}"
    bound = "compute-bound" if r["compute_bound"] else "memory-bound"
    return (
        f"batch {r['batch']}: decode step {r['decode_ms']:.2f} ms, verify step ({r['k'] + 1} tokens/seq) "
        f"{r['verify_ms']:.2f} ms ({bound}) &nbsp;·&nbsp; break-even per-position α = {even}<br>{_verdict(r['speedup'])}"
    )


def _draw_batch(r: dict) -> Figure:
    rows = [batch_report(b, r["alpha"], r["k"], r["draft_cost"]) for b in BATCHES]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.plot(BATCHES, [x["speedup"] for x in rows], "o-", label=f"α = {r['alpha']:.2f}, k = {r['k']}")
    ax.axhline(1, color=SLOWER, lw=1, ls="--", label="plain decoding")
    ax.plot([r["batch"]], [r["speedup"]], "o", ms=12, mfc="none", mec="k", mew=2)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="batch size (concurrent sequences)", ylabel="speedup", title="speculation vs batch size (roofline)")
    ax.legend()
    fig.tight_layout()
    return fig


def batch_panel(batch: int = 1, alpha: float = 0.8, k: int = 4, draft_cost: float = 0.05) -> Panel:
    """Sliders batch, α, k, draft cost -> batch_report, with speedup vs batch size."""
    controls = {
        "batch": _slider("batch size", batch, 1, 512, 1),
        "alpha": _slider("acceptance rate α", alpha, 0.0, 0.99, 0.01),
        "k": _slider("draft tokens k", k, 1, 8, 1),
        "draft_cost": _slider("draft cost / token", draft_cost, 0.0, 0.5, 0.01),
    }
    return Panel(controls, batch_report, _render_batch, _draw_batch)


# ---------------------------------------------------------------- live tree viewer on the real model

@torch.inference_mode()
def inspect_tree_step(
    target: Transformer, drafter: Drafter | Transformer, context: Sequence[int], root: int, branching: Sequence[int]
) -> dict:
    """One greedy tree step, laid open: draft a tree below `root` (after `context`), verify it in one pass.

    -> tokens, parents (the drafted tree), path (accepted node ids from the root), next_token (the
    target's token after the path), target_argmax (the target's prediction after every node).
    """
    drafter = as_drafter(drafter)
    context = [int(t) for t in context]
    nodes = tree_node_count(branching) + 1
    drafter.reset(len(context) + nodes + 1)
    cache = target.new_cache(batch_size=1, max_len=len(context) + nodes)
    if context:
        _, feats = target_forward(target, drafter, torch.tensor([context], device=target.device), cache)
        if feats is not None:
            drafter.observe(feats)
    tree = build_draft_tree(drafter, context, root, branching)
    ids = torch.tensor([tree.tokens], device=target.device)
    logits, _ = target_forward(target, drafter, ids, cache, positions(tree.parents, len(context), target.device),
                               tree_mask(tree.parents, target.device))
    path = accept_greedy(tree.tokens, tree.parents, logits)
    return dict(tokens=tree.tokens, parents=tree.parents, path=path, next_token=int(logits[path[-1]].argmax()),
                target_argmax=logits.argmax(-1).tolist())


def tree_step_summary(drafted: int, accepted: Sequence[str], next_token: str) -> str:
    """One line (HTML) on a verified tree: how many nodes were drafted, which were accepted, the target's token.

    tree_step_summary(14, [], "x") reads "14 drafted nodes, none accepted: the target's own token is x".
    """
    nodes = f"{drafted} drafted node{'s' if drafted != 1 else ''}"
    token = f"<code>{html.escape(next_token)}</code>"
    if not accepted:
        return f"{nodes}, none accepted: the target's own token is {token}"
    return (f"{nodes}, {len(accepted)} accepted: <code>{html.escape(''.join(accepted))}</code>, "
            f"then the target's token {token}")


def tree_viewer_panel(
    target: Transformer, drafter: Drafter | Transformer, tokenizer, prompts: dict[str, Sequence[int]],
    max_step: int = 32, width: int = 2, depth: int = 3,
) -> Panel:
    """Pick a prompt, a decoding step, a width and a depth; see the real draft tree and the accepted path.

    Step s: the context is the prompt plus the first s tokens of its greedy continuation, the root is
    token s. Nodes are labelled with their token text; the accepted path is green.
    """
    continuation = {name: generate(target, torch.tensor([list(p)], device=target.device), max_step + 1)[0].tolist()
                    for name, p in prompts.items()}

    def compute(prompt: str, step: int, width: int, depth: int) -> dict:
        context = list(prompts[prompt]) + continuation[prompt][:step]
        r = inspect_tree_step(target, drafter, context, continuation[prompt][step], [width] * depth)
        r["labels"] = [repr(tokenizer.decode([t]))[1:-1] for t in r["tokens"]]
        r["context_tail"] = tokenizer.decode(context[-40:])
        return r

    def render(r: dict) -> str:
        return f"<pre>…{html.escape(r['context_tail'][-160:])}</pre>" + tree_step_summary(
            len(r["tokens"]) - 1, [r["labels"][i] for i in r["path"][1:]], repr(tokenizer.decode([r["next_token"]]))[1:-1]
        )

    def draw(r: dict) -> Figure:
        return draw_tree(r["parents"], r["labels"], r["path"], title="draft tree (green: accepted path)")

    names = list(prompts)
    controls = {
        "prompt": widgets.Dropdown(options=names, value=names[0], description="prompt"),
        "step": _slider("decoding step", 0, 0, max_step, 1),
        "width": _slider("width (children/node)", width, 1, 4, 1),
        "depth": _slider("depth (levels)", depth, 1, 5, 1),
    }
    return Panel(controls, compute, render, draw)
