"""The serving sweep of vLLM on the course's model (`tree_spec.engine.sweep`), drawn: one panel per figure of merit
against concurrency, one line per speculative config, the repeats' min..max as error bars."""
from __future__ import annotations

import statistics

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

PANELS = (("output_throughput", "output throughput (tokens/s)"), ("mean_tpot_ms", "time per output token (ms)"),
          ("mean_itl_ms", "mean gap between chunks, ITL (ms)"), ("p99_itl_ms", "P99 gap between chunks, ITL (ms)"))
COLOURS = ("#000000", "#E69F00", "#0072B2", "#009E73", "#D55E00")  # Okabe-Ito


def draw_serving_sweep(result: dict) -> Figure:
    """result: what `python -m tree_spec.engine.sweep` wrote ({"setup", "rows"}) -> a 1 x 4 figure."""
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 3.4))
    configs = list(result["setup"]["configs"])
    levels = sorted({r["concurrency"] for r in result["rows"]})
    for ax, (metric, label) in zip(axes, PANELS):
        for config, colour in zip(configs, COLOURS):
            per_level = [[r[metric] for r in result["rows"] if r["config"] == config and r["concurrency"] == c]
                         for c in levels]
            mid = [statistics.median(v) for v in per_level]
            err = [[m - min(v) for m, v in zip(mid, per_level)], [max(v) - m for m, v in zip(mid, per_level)]]
            ax.errorbar(levels, mid, yerr=err, marker="o", capsize=3, color=colour, label=config)
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_title(label, fontsize=10)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    setup = result["setup"]
    fig.suptitle(f"vLLM ({setup['engine']}) serving {setup['model']}: {setup['prompts']} prompts x "
                 f"{setup['new_tokens']} tokens, {setup['repeats']} repeats (bars: min..max)", fontsize=10)
    fig.tight_layout()
    return fig
