"""Pictures for serving speculation (notebooks 04 and 05), in the Okabe-Ito colour-blind-safe palette.

`draw_roofline`: arithmetic intensity vs attainable FLOP/s, with the decode and verify points of each batch size;
`draw_break_even`: the break-even acceptance (ratio and per-position α) vs batch size;
`draw_batched_verify`: one batched verify pass, per-row matches and accepts, and each row's cache after `truncate`;
`draw_slot_timeline`: a request's KV slots over scheduler steps from step 0 (accepted, rejected, overwritten);
`draw_serving_stack`: client -> engine (scheduler, draft, target, accept) -> stream, metrics and autoscaler.
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from ..analysis.speedup import Roofline, chain_break_even_alpha, break_even_acceptance_ratio, roofline_step_time

# Okabe-Ito
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
GREY = "#BBBBBB"


def roofline_points(batch: int, tokens_per_seq: int, context: int = 1024, hw: Roofline = Roofline()) -> tuple[float, float]:
    """(arithmetic intensity in FLOP/byte, attained FLOP/s) of one forward on the roofline of `roofline_step_time`
    (the fixed per-step overhead left out: it is time with no FLOPs and no bytes)."""
    flops = 2 * hw.params * batch * tokens_per_seq
    bytes_moved = hw.weight_bytes + batch * context * hw.kv_bytes_per_token
    seconds = roofline_step_time(batch, tokens_per_seq, context, hw) - hw.fixed_s
    return flops / bytes_moved, flops / seconds


def draw_roofline(batches: Sequence[int], k: int, context: int = 1024, hw: Roofline = Roofline(),
                  ax: Axes | None = None) -> Figure:
    """The roofline (attainable FLOP/s = min(achieved peak, intensity x bandwidth)) with a decode point (1 token
    per sequence) and a verify point (k + 1 tokens) per batch size, joined by an arrow."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.2))
    ridge = hw.peak_flops * hw.efficiency / hw.bandwidth
    xs = [0.5, ridge, 1e4]
    ax.plot(xs, [min(hw.peak_flops * hw.efficiency, x * hw.bandwidth) for x in xs], color=BLACK, lw=1.5,
            label=f"roof: {hw.bandwidth / 1e12:.2f} TB/s, {hw.peak_flops * hw.efficiency / 1e12:.0f} TFLOP/s (assumed efficiency)")
    ax.axvline(ridge, color=GREY, ls=":", lw=1)
    ax.text(ridge * 1.08, 2e12, f"ridge {ridge:.0f} FLOP/B", fontsize=7, color="0.4")
    for i, b in enumerate(batches):
        (x0, y0), (x1, y1) = roofline_points(b, 1, context, hw), roofline_points(b, k + 1, context, hw)
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="->", color="0.5", lw=0.8))
        ax.plot(x0, y0, "o", color=BLUE, ms=6, label="decode (1 token / seq)" if i == 0 else None)
        ax.plot(x1, y1, "s", color=VERMILLION, ms=6, label=f"verify ({k + 1} tokens / seq)" if i == 0 else None)
        ax.text(x0, y0 * 0.62, f"B={b}", fontsize=7, ha="center", color=BLUE)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP per byte moved)",
           ylabel="attained FLOP/s", title="roofline model (assumed inputs): decode and verify by batch size B")
    ax.legend(fontsize=7, loc="upper left")
    return ax.figure


def break_even_curves(batches: Sequence[int], k: int, draft_cost: float, context: int = 1024,
                      hw: Roofline = Roofline()) -> tuple[list[float], list[float]]:
    """Per batch size: (break-even acceptance ratio, break-even per-position α) of a k-token chain whose draft
    costs draft_cost decode steps per token; overhead = (verify + k·c·decode) / decode − 1."""
    ratios, alphas = [], []
    for b in batches:
        decode, verify = roofline_step_time(b, 1, context, hw), roofline_step_time(b, k + 1, context, hw)
        overhead = (verify + k * draft_cost * decode) / decode - 1
        ratios.append(min(1.0, break_even_acceptance_ratio(overhead, k)))
        alpha = chain_break_even_alpha(k, overhead / k)
        alphas.append(1.0 if alpha is None else alpha)
    return ratios, alphas


def draw_break_even(batches: Sequence[int], k: int, draft_cost: float, context: int = 1024,
                    hw: Roofline = Roofline(), alpha: float | None = None, ax: Axes | None = None) -> Figure:
    """Break-even acceptance vs batch size in both units; `alpha`: a workload's per-position α, drawn as a line."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.6))
    ratios, alphas = break_even_curves(batches, k, draft_cost, context, hw)
    ax.plot(batches, alphas, color=BLUE, lw=2, label="per-position α at break-even (E(α, k) = 1 + overhead)")
    ax.plot(batches, ratios, color=ORANGE, lw=2, ls="--", label="acceptance ratio at break-even (overhead / k)")
    if alpha is not None:
        ax.axhline(alpha, color=GREEN, lw=1, ls=":", label=f"workload α = {alpha}")
    ax.set(xscale="log", xlabel="batch size", ylabel="acceptance needed to break even", ylim=(0, 1.02),
           title=f"model: the break-even rises with concurrency (k = {k}, draft cost {draft_cost:g})")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7, loc="upper left")
    return ax.figure


def draw_batched_verify(matches: Sequence[Sequence[int]], n_accepted: Sequence[int],
                        lengths_before: Sequence[int], lengths_after: Sequence[int]) -> Figure:
    """Left: one verify pass of B rows, k drafts each: draft i + 1 vs the target's prediction at row position i
    (match / miss / after the first miss), and the extra token each row emits. Right: each row's KV slots after
    `truncate`: the cached prefix, the root and accepted drafts kept, the rejected drafts' slots dropped."""
    B, k = len(matches), len(matches[0])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.65 * B), gridspec_kw=dict(width_ratios=(1, 1.3)))
    for r in range(B):
        for i in range(k):
            color = (GREEN if i < n_accepted[r] else VERMILLION if i == n_accepted[r] else GREY)
            ax.add_patch(Rectangle((i, B - 1 - r), 0.95, 0.9, fc=color, ec="white"))
            ax.text(i + 0.47, B - 0.55 - r, "✓" if matches[r][i] else "✗", ha="center", va="center", fontsize=10,
                    color="white" if color != GREY else BLACK)
        ax.add_patch(Rectangle((k, B - 1 - r), 0.95, 0.9, fc=BLUE, ec="white"))
        ax.text(k + 0.47, B - 0.55 - r, "bonus" if n_accepted[r] == k else "fix", ha="center", va="center",
                fontsize=7, color="white")
        ax.text(-0.15, B - 0.55 - r, f"row {r}: {n_accepted[r]} acc.", ha="right", va="center", fontsize=8)
    ax.set(xlim=(-1.6, k + 1), ylim=(0, B), title="one verify pass: draft i vs the target's row i − 1")
    ax.set_xticks([i + 0.47 for i in range(k + 1)], [f"d{i + 1}" for i in range(k)] + ["next"]); ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.legend(handles=[Patch(color=GREEN, label="accepted"), Patch(color=VERMILLION, label="first miss"),
                       Patch(color=GREY, label="dropped after it"), Patch(color=BLUE, label="target's token")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    for r in range(B):
        y = B - 1 - r
        bx.barh(y, lengths_before[r], color=GREY, height=0.6)
        bx.barh(y, lengths_after[r] - lengths_before[r], left=lengths_before[r], color=GREEN, height=0.6)
        dropped = k + 1 - (lengths_after[r] - lengths_before[r])
        bx.barh(y, dropped, left=lengths_after[r], color="white", edgecolor=VERMILLION, hatch="///", height=0.6)
        bx.text(lengths_after[r] + dropped + 0.5, y, f"{lengths_before[r]} -> {lengths_after[r]}", va="center",
                fontsize=8)
    bx.set(yticks=range(B), yticklabels=[f"row {r}" for r in reversed(range(B))], xlabel="KV slots",
           title="each row's cache after truncate(length + 1 + accepted)",
           xlim=(0, max(lengths_before) + k + 9))
    bx.legend(handles=[Patch(color=GREY, label="cached before"), Patch(color=GREEN, label="root + accepted: kept"),
                       Patch(fc="white", ec=VERMILLION, hatch="///", label="rejected: length moved back")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    fig.tight_layout()
    return fig


def draw_slot_timeline(events: Sequence[tuple[int, int, int, int]], title: str = "", margin: int = 3,
                       ax: Axes | None = None) -> Figure:
    """One request's KV slots over time: one column per scheduler step, the time axis starting at step 0 (steps
    before the request's first event stay empty), the slots each step wrote stacked upward. events = (step, first
    slot written, slots written, rejected drafts among them), in step order, the first one the prefill. The root and
    accepted drafts commit their slots; the rejected drafts' slots stay allocated but do not count, and the next
    step writes over them (outlined). The prefill's column shows its last `margin` slots and names the rest."""
    if ax is None:
        _, ax = plt.subplots(figsize=(max(7.0, 2 + 0.45 * (events[-1][0] + 1)), 4.2), layout="constrained")
    stale: set[int] = set()
    first, last = events[0][0], events[-1][0]
    lo = events[0][1] + events[0][2] - margin                   # the lowest slot drawn: the prefill's last `margin`
    hi = max(w + n for _, w, n, _ in events)
    for step, w, n, rejected in events:
        for s in range(max(w, lo), w + n):
            color = VERMILLION if s >= w + n - rejected else (GREY if w == 0 else GREEN)
            over = s in stale
            ax.add_patch(Rectangle((step - 0.42, s), 0.84, 0.9, fc=color, ec=BLACK if over else "none",
                                   lw=1.6 if over else 0))
        if w < lo:                                              # slots cut from this column
            ax.text(step, lo - 0.4, f"+ slots\n{w}–{lo - 1}", ha="center", va="top", fontsize=6)
        stale = (stale - set(range(w, w + n))) | set(range(w + n - rejected, w + n))
    if first > 0:
        ax.text((first - 1) / 2, lo + 1, "waiting", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set(xlim=(-0.6, last + 0.6), ylim=(lo - 3.2, hi + 0.5), xlabel="scheduler step (time)", ylabel="KV slot",
           title=title or "a request's KV slots over time")
    ax.set_xticks(range(0, last + 1))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for spine in ("right", "top"):
        ax.spines[spine].set_visible(False)
    ax.legend(handles=[Patch(color=GREY, label="prefill (prompt)"), Patch(color=GREEN, label="root + accepted"),
                       Patch(color=VERMILLION, label="rejected draft (not counted)"),
                       Patch(fc="white", ec=BLACK, lw=1.6, label="overwrites a rejected slot")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
    return ax.figure


def draw_serving_stack() -> Figure:
    """The serving stack: client -> scheduler -> draft -> target verify -> accept -> token stream; Prometheus
    metrics feed an autoscaler that scales replicas on queue wait."""
    fig, ax = plt.subplots(figsize=(12.5, 3.6))
    ax.axis("off"); ax.set_xlim(0, 13.2); ax.set_ylim(0, 4.6)

    def box(x, y, w, text, color):
        ax.add_patch(Rectangle((x, y), w, 0.9, fc=color, ec=BLACK, lw=1))
        ax.text(x + w / 2, y + 0.45, text, ha="center", va="center", fontsize=8)

    def arrow(x0, y0, x1, y1, text="", rad=0.0, dy=0.12, dx=0.0):
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="->", lw=1.2, connectionstyle=f"arc3,rad={rad}"))
        if text:
            ax.text((x0 + x1) / 2 + dx, (y0 + y1) / 2 + dy, text, ha="center", fontsize=7)

    ax.add_patch(Rectangle((1.6, 1.75), 8.3, 2.7, fc="#f4f4f4", ec="gray", ls="--"))
    ax.text(1.7, 1.85, "vLLM / SGLang: one replica per GPU", fontsize=8, color="gray")
    y = 2.4
    for x, yy, w, text, color in ((0.1, y, 1.2, "client", SKY), (1.8, y, 1.6, "scheduler\nKV slots (§1)", "white"),
                                  (3.9, y, 1.6, "draft: EAGLE-3\nheads or n-gram", ORANGE),
                                  (6.0, y, 1.6, "target FP8/INT4\nverify: k+1\nqueries (§2)", GREEN),
                                  (8.1, y, 1.6, "accept / reject\n(§3)", "white"), (10.4, y, 1.4, "token stream", SKY),
                                  (10.4, 0.2, 1.6, "Prometheus: acceptance\ncounters, queue wait,\nP99 latency", PURPLE),
                                  (6.0, 0.2, 2.2, "autoscaler\non queue wait", PURPLE)):
        box(x, yy, w, text, color)
    for x0, x1 in [(1.3, 1.8), (3.4, 3.9), (5.5, 6.0), (7.6, 8.1), (9.7, 10.4), (11.8, 12.6)]:
        arrow(x0, y + 0.45, x1, y + 0.45)
    ax.text(12.65, y + 0.4, "client", fontsize=8)
    arrow(8.9, y + 0.9, 2.6, y + 0.9, "next step: num_computed_tokens -= rejected", rad=0.25, dy=0.8)
    arrow(11.1, y, 11.1, 1.1, "metrics", dx=0.4)
    arrow(10.4, 0.65, 8.2, 0.65)
    arrow(6.0, 0.65, 4.0, 1.75, "add / remove replicas", dy=-0.35, dx=-0.9)
    ax.set_title("the serving stack with speculative decoding", fontsize=10)
    return fig
