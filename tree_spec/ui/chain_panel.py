"""The chain panel: speedup of chain speculation from the acceptance rate α, k drafts and the draft cost c."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ..analysis.speedup import chain_break_even_alpha, expected_speedup, expected_tokens_per_verify, wall_time_per_token
from .panel import SLOWER, Panel, slider, verdict


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
        f"{r['wall_time_per_token']:.3f} decode steps &nbsp;·&nbsp; break-even per-position α = {even}<br>"
        f"{verdict(r['speedup'], 'model (v = 1)')}"
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
    ax.set(xlabel="per-position α", ylabel="speedup", title=f"chain speculation, model (v = 1), draft cost c = {r['c']:.2f}")
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def speedup_panel(alpha: float = 0.8, k: int = 4, c: float = 0.05) -> Panel:
    """Sliders α, k, c -> speedup_report, with speedup vs α for k = 1..8 (the chosen k bold)."""
    controls = {
        "alpha": slider("per-position α", alpha, 0.0, 0.99, 0.01),
        "k": slider("draft tokens k", k, 1, 8, 1),
        "c": slider("draft cost c", c, 0.0, 1.0, 0.01),
    }
    return Panel(controls, speedup_report, _render_speedup, _draw_speedup)
