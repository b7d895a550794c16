"""Interactive panels for the notebooks: sliders wired to plain functions.

Each `*_report(...)` is a plain function (testable without a browser) returning a dict of numbers;
each `*_panel()` builds an ipywidgets `Panel` whose sliders call that function on every change and
show the result as text and a plot. Tests drive a panel by setting `panel.controls[name].value` and
reading `panel.result`.

Cost model of the tree and batch panels: a forward pass costs `roofline_step_time` (memory roof vs
compute roof, every verified token counted), so wide or deep trees and large batches pay for the
tokens they verify. Drafting costs `draft_cost` decode steps per draft level (one draft forward per
level, the whole frontier in it).
"""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import clear_output, display
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from mini_llm import Transformer, generate

from .drafters import Drafter, as_drafter
from .plots import draw_tree

from .speedup import (
    Roofline,
    expected_speedup,
    expected_tokens_per_verify,
    roofline_step_time,
    tree_expected_tokens,
    tree_node_count,
    tree_verify_tokens,
    wall_time_per_token,
)
from .topology import positions, tree_mask
from .tree import accept_greedy, build_draft_tree, target_forward

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
    """{"alpha": 0.8, "k": 4} -> "alpha = 0.8, k = 4" (floats with at most 4 significant digits)."""
    return ", ".join(f"{name} = {value:.4g}" if isinstance(value, float) else f"{name} = {value}"
                     for name, value in values.items())


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
    """The alpha at which expected_speedup(alpha, k, c) = 1, i.e. E(alpha, k) = k * c + 1; None if c >= 1.

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
        f"{r['wall_time_per_token']:.3f} target passes &nbsp;·&nbsp; break-even α = {even}<br>{_verdict(r['speedup'])}"
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


# ---------------------------------------------------------------- trees: width, depth, hit rate, cost, batch

def tree_report(
    width: int, depth: int, hit_rate: float, draft_cost: float = 0.05, batch: int = 1,
    context: int = 1024, hw: Roofline = Roofline(),
) -> dict:
    """A full tree (`width` children per node, `depth` levels) on the roofline model, per verify step.

    expected_tokens: tree_expected_tokens([width] * depth, hit_rate) (each candidate hits independently);
    verify_ms: one forward over batch * (nodes + 1) tokens; draft_ms: depth * draft_cost decode steps;
    speedup = expected_tokens * decode_ms / (verify_ms + draft_ms); chain_speedup: the same for a
    chain of the same depth, for comparison.
    """
    branching = [width] * depth
    nodes = tree_node_count(branching)
    decode = roofline_step_time(batch, 1, context, hw)

    def speedup(nodes: int, expected: float) -> tuple[float, float]:
        verify = roofline_step_time(batch, nodes + 1, context, hw)
        return verify, expected * decode / (verify + depth * draft_cost * decode)

    expected = tree_expected_tokens(branching, hit_rate)
    verify, tree_speedup = speedup(nodes, expected)
    _, chain = speedup(depth, tree_expected_tokens([1] * depth, hit_rate))
    return dict(
        width=width, depth=depth, hit_rate=hit_rate, draft_cost=draft_cost, batch=batch,
        branching=branching, nodes=nodes, verify_tokens=tree_verify_tokens(branching, batch),
        expected_tokens=expected, decode_ms=decode * 1e3, verify_ms=verify * 1e3,
        draft_ms=depth * draft_cost * decode * 1e3, speedup=tree_speedup, chain_speedup=chain,
    )


def _render_tree(r: dict) -> str:
    return (
        f"branching {r['branching']}: {r['nodes']} draft nodes, {r['verify_tokens']} tokens to verify "
        f"(batch {r['batch']})<br>expected tokens per step {r['expected_tokens']:.2f} &nbsp;·&nbsp; "
        f"decode step {r['decode_ms']:.2f} ms, verify step {r['verify_ms']:.2f} ms, drafting {r['draft_ms']:.2f} ms"
        f" &nbsp;·&nbsp; a chain of the same depth: {r['chain_speedup']:.2f}×<br>{_verdict(r['speedup'])}"
    )


def _draw_tree(r: dict) -> Figure:
    widths, depths = np.arange(1, 7), np.arange(1, 9)
    grid = np.array([[tree_report(w, d, r["hit_rate"], r["draft_cost"], r["batch"])["speedup"] for w in widths]
                     for d in depths])
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    norm = TwoSlopeNorm(1.0, vmin=min(grid.min(), 0.99), vmax=max(grid.max(), 1.01))  # white at 1x
    image = ax.imshow(grid, origin="lower", cmap="RdYlGn", norm=norm, extent=(0.5, 6.5, 0.5, 8.5), aspect="auto")
    ax.contour(widths, depths, grid, levels=[1.0], colors="k", linewidths=1.5)
    ax.plot([r["width"]], [r["depth"]], "o", ms=12, mfc="none", mec="k", mew=2)
    fig.colorbar(image, ax=ax, label="speedup (black line: 1×)")
    ax.set(xlabel="width (children per node)", ylabel="depth (levels)",
           title=f"hit rate {r['hit_rate']:.2f}, batch {r['batch']}, draft cost {r['draft_cost']:.2f}")
    fig.tight_layout()
    return fig


def tree_panel(width: int = 2, depth: int = 4, hit_rate: float = 0.6, draft_cost: float = 0.05, batch: int = 1) -> Panel:
    """Sliders width, depth, hit rate, draft cost, batch -> tree_report, with a speedup map over width x depth."""
    controls = {
        "width": _slider("width (children/node)", width, 1, 6, 1),
        "depth": _slider("depth (levels)", depth, 1, 8, 1),
        "hit_rate": _slider("draft hit rate", hit_rate, 0.0, 1.0, 0.01),
        "draft_cost": _slider("draft cost / level", draft_cost, 0.0, 0.5, 0.01),
        "batch": _slider("batch size", batch, 1, 256, 1),
    }
    return Panel(controls, tree_report, _render_tree, _draw_tree)


# ---------------------------------------------------------------- batch size on the roofline

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def batch_report(
    batch: int, alpha: float = 0.8, k: int = 4, draft_cost: float = 0.05, context: int = 1024, hw: Roofline = Roofline()
) -> dict:
    """Chain speculation at one batch size on the roofline model (the chapter's table, one row).

    decode_ms: a step with 1 token per sequence; verify_ms: k + 1 tokens per sequence;
    speedup = E * decode / (verify + k * draft_cost * decode); break_even_alpha: the alpha where that
    speedup is 1 at this batch (None if even alpha = 1 does not pay).
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
        f"{r['verify_ms']:.2f} ms ({bound}) &nbsp;·&nbsp; break-even α = {even}<br>{_verdict(r['speedup'])}"
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
