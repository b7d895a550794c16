"""The speedup chart of notebook 01: measured speedup per drafter, with the spread of its repeats.

Draws what it is given (speedups from real interleaved runs) and returns a matplotlib Figure made without pyplot,
so a notebook's backend is left alone and the cell stores the image by ending with the figure. Colours: Okabe-Ito.
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch

VERDICT_COLORS = {"faster": "#009E73", "within noise": "#56B4E9", "slower": "#D55E00"}  # green, sky, vermillion


def draw_speedups(speedups: Mapping[str, Sequence[float]],
                  title: str = "measured speedup over plain decoding") -> Figure:
    """One bar per drafter at the median of its repeats' speedups (plain ms per token ÷ the drafter's), an error bar
    from their min to their max, and a dashed line at 1x (plain decoding). A bar is green when its whole range lies
    above 1x (faster), vermillion when below (slower), sky blue when the range straddles 1x (within noise); each is
    labelled with its median and range. Raises ValueError for no drafters or a drafter without repeats."""
    if not speedups:
        raise ValueError("no drafters to draw")
    empty = [name for name, values in speedups.items() if not len(values)]
    if empty:
        raise ValueError(f"no repeats for {empty}")
    names = list(speedups)
    lows = [min(speedups[n]) for n in names]
    highs = [max(speedups[n]) for n in names]
    medians = [statistics.median(speedups[n]) for n in names]
    verdicts = ["faster" if lo > 1 else "slower" if hi < 1 else "within noise" for lo, hi in zip(lows, highs)]
    fig = Figure(figsize=(max(6.5, 1.7 * len(names) + 1.5), 4.0), layout="constrained")
    ax = fig.subplots()
    xs = list(range(len(names)))
    ax.bar(xs, medians, width=0.6, color=[VERDICT_COLORS[v] for v in verdicts])
    ax.errorbar(xs, medians, yerr=[[m - lo for m, lo in zip(medians, lows)], [hi - m for m, hi in zip(medians, highs)]],
                fmt="none", ecolor="black", capsize=6, lw=1.2)
    ax.axhline(1.0, color="0.3", ls="--", lw=1)
    top = max(highs + [1.0])
    for x, m, lo, hi in zip(xs, medians, lows, highs):
        y = 1.0 if hi < 1.0 < hi + 0.15 * top else hi   # a label clear of the 1x line
        ax.text(x, y + 0.03 * top, f"{m:.2f}x\n({lo:.2f}–{hi:.2f})", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, names, fontsize=8)
    ax.set(ylabel="speedup (x plain decoding)", ylim=(0, 1.3 * top))
    ax.set_title(title, fontsize=10)
    shown = [v for v in VERDICT_COLORS if v in verdicts]
    fig.legend([Patch(color=VERDICT_COLORS[v]) for v in shown] + [ax.lines[-1]],
               [f"{v} (range vs 1x)" for v in shown] + ["plain decoding (1x)"], fontsize=8, ncol=len(shown) + 1,
               loc="outside lower center", frameon=False)
    return fig
