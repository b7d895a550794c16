"""The batch panel: chain speculation against the batch size on the roofline model."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..analysis.speedup import Roofline, break_even, expected_tokens_per_verify, roofline_step_time
from .panel import SLOWER, Panel, slider, verdict

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def batch_report(
    batch: int, alpha: float = 0.8, k: int = 4, draft_cost: float = 0.05, context: int = 1024, hw: Roofline = Roofline()
) -> dict:
    """Chain speculation at one batch size on the roofline model (one row of `speedup_table`).

    decode_ms: a step with 1 token per sequence; verify_ms: k + 1 tokens per sequence;
    speedup = E * decode / (verify + k * draft_cost * decode); break_even_alpha: the per-position alpha (of
    E(alpha, k)) where that speedup is 1 at this batch (None if even alpha = 1 does not pay). The
    break-even acceptance ratio at the same point is `analysis.speedup.break_even_acceptance_ratio(overhead, k)`.
    """
    decode = roofline_step_time(batch, 1, context, hw)
    verify = roofline_step_time(batch, k + 1, context, hw)
    cost = verify + k * draft_cost * decode

    def speedup(a: float) -> float:
        return expected_tokens_per_verify(a, k) * decode / cost

    return dict(batch=batch, alpha=alpha, k=k, draft_cost=draft_cost, decode_ms=decode * 1e3, verify_ms=verify * 1e3,
                speedup=speedup(alpha), break_even_alpha=break_even(speedup),
                compute_bound=verify - hw.fixed_s > (hw.weight_bytes + batch * context * hw.kv_bytes_per_token) / hw.bandwidth)


def _render_batch(r: dict) -> str:
    even = "none (α = 1 still does not pay)" if r["break_even_alpha"] is None else f"{r['break_even_alpha']:.3f}"
    bound = "compute-bound" if r["compute_bound"] else "memory-bound"
    return (
        f"batch {r['batch']}: decode step {r['decode_ms']:.2f} ms, verify step ({r['k'] + 1} tokens/seq) "
        f"{r['verify_ms']:.2f} ms ({bound}) &nbsp;·&nbsp; break-even per-position α = {even}<br>{verdict(r['speedup'])}"
    )


def _draw_batch(r: dict) -> Figure:
    rows = [batch_report(b, r["alpha"], r["k"], r["draft_cost"]) for b in BATCHES]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    ax.plot(BATCHES, [x["speedup"] for x in rows], "o-", label=f"α = {r['alpha']:.2f}, k = {r['k']}")
    ax.axhline(1, color=SLOWER, lw=1, ls="--", label="plain decoding")
    ax.plot([r["batch"]], [r["speedup"]], "o", ms=12, mfc="none", mec="k", mew=2)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="batch size (concurrent sequences)", ylabel="speedup", title="speculation vs batch size (roofline model)")
    ax.legend()
    fig.tight_layout()
    return fig


def batch_panel(batch: int = 1, alpha: float = 0.8, k: int = 4, draft_cost: float = 0.05) -> Panel:
    """Sliders batch, α, k, draft cost -> batch_report, with speedup vs batch size."""
    controls = {
        "batch": slider("batch size", batch, 1, 512, 1),
        "alpha": slider("acceptance rate α", alpha, 0.0, 0.99, 0.01),
        "k": slider("draft tokens k", k, 1, 8, 1),
        "draft_cost": slider("draft cost / token", draft_cost, 0.0, 0.5, 0.01),
    }
    return Panel(controls, batch_report, _render_batch, _draw_batch)
