"""Pictures for notebooks 00-01: the verify pass's k + 1 logit rows against the drafts, `truncate` as KV slots,
and measured timelines of several drafters beside plain decoding. Okabe-Ito colours (colour-blind safe)."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .plots import draw_timeline

# Okabe-Ito: bluish green, vermillion, blue, orange, grey
KEPT, REJECTED, BONUS, CORRECTION, DROPPED = "#009E73", "#D55E00", "#0072B2", "#E69F00", "#BBBBBB"


def _box(ax: Axes, x: float, y: float, text: str, color: str, fg: str = "white", size: int = 9) -> None:
    ax.text(x, y, text, ha="center", va="center", color=fg, fontsize=size, family="monospace",
            bbox=dict(boxstyle="round,pad=0.3", fc=color, ec="none"))


def draw_verify_rows(root: str, drafts: Sequence[str], predicted: Sequence[str], n_accepted: int,
                     ax: Axes | None = None) -> Figure:
    """The verify pass as k + 1 rows: row i is fed token i ([root, d_1 .. d_k]) and predicts the next token;
    row i's prediction is compared with draft i + 1, and the last row (after d_k) gives the bonus token.

    root, drafts: the fed tokens' text; predicted: the k + 1 predictions' text (the argmax of each logit row);
    n_accepted: drafts kept. Rows up to the first mismatch are kept (green), the mismatching row supplies the
    correction (orange, its draft vermillion), later rows are dropped (grey); with all k kept, the last row's
    token is the bonus (blue)."""
    k = len(drafts)
    if len(predicted) != k + 1 or not 0 <= n_accepted <= k:
        raise ValueError(f"need k + 1 = {k + 1} predictions and 0 <= n_accepted <= k, got {len(predicted)}, {n_accepted}")
    if ax is None:
        _, ax = plt.subplots(figsize=(8.5, 0.55 * (k + 1) + 1.4))
    fed = [root] + list(drafts)
    for i in range(k + 1):
        y = k - i
        fed_color = BONUS if i == 0 else KEPT if i <= n_accepted else REJECTED if i == n_accepted + 1 else DROPPED
        _box(ax, 0, y, repr(fed[i]), fed_color, fg="black" if fed_color == DROPPED else "white")
        ax.annotate("", xy=(1.2, y), xytext=(0.75, y), arrowprops=dict(arrowstyle="->", color="0.4"))
        if i < n_accepted:
            color, verdict = KEPT, f"= d{i + 1} {drafts[i]!r}: accept"
        elif i == n_accepted and i < k:
            color, verdict = CORRECTION, f"≠ d{i + 1} {drafts[i]!r}: correction"
        elif i == k and n_accepted == k:
            color, verdict = BONUS, "no draft left: bonus token"
        else:
            color, verdict = DROPPED, "dropped (after the first mismatch)"
        _box(ax, 2.0, y, repr(predicted[i]), color, fg="black" if color == DROPPED else "white")
        ax.text(2.9, y, f"row {i}: {verdict}", va="center", fontsize=9,
                color=REJECTED if color == CORRECTION else "black")
    ax.text(0, k + 0.8, "fed (one forward)", ha="center", fontsize=9, weight="bold")
    ax.text(2.0, k + 0.8, "row's argmax", ha="center", fontsize=9, weight="bold")
    ax.set(xlim=(-1.0, 7.5), ylim=(-0.8, k + 1.3))
    ax.axis("off")
    ax.set_title(f"{k + 1} logit rows: row i checks draft i + 1; the last row gives the bonus ({n_accepted} accepted)")
    ax.figure.tight_layout()
    return ax.figure


def draw_truncate(labels: Sequence[str], start: int, n_accepted: int, ax: Axes | None = None) -> Figure:
    """`cache.truncate(start + 1 + n_accepted)` as KV slots, before and after.

    labels: the tokens a verify pass wrote, in slot order from slot `start` (the root, then the k drafts).
    Before: committed slots [0, start) and the k + 1 written ones. After: the length moves back; the slots of the
    rejected drafts still hold their K/V (hatched) but lie past the length, where the next forward overwrites them."""
    n, keep = len(labels), 1 + n_accepted
    if not 1 <= keep <= n:
        raise ValueError(f"n_accepted must be in [0, {n - 1}], got {n_accepted}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(8.5, 4.0 + 0.9 * n), 2.6))
    for name, y, length in [("after the verify pass", 1.0, start + n), (f"after truncate({start + keep})", 0.0, start + keep)]:
        ax.text(-2.0, y, name, ha="right", va="center", fontsize=9, weight="bold")
        _box(ax, -1.0, y, f"0..{start - 1}", BONUS, size=8)
        for i, label in enumerate(labels):
            live = start + i < length
            color = KEPT if i < keep else REJECTED
            ax.text(i, y, repr(label), ha="center", va="center", fontsize=8, family="monospace",
                    color="white" if live else "black",
                    bbox=dict(boxstyle="round,pad=0.3", fc=color if live else "white", ec=color, hatch=None if live else "///"))
        ax.plot([length - start - 0.5] * 2, [y - 0.3, y + 0.3], color="black", lw=2)
        ax.text(length - start - 0.45, y + 0.32, f"length {length}", fontsize=7)
    for i in range(n):
        ax.text(i, -0.45, str(start + i), ha="center", fontsize=7, color="0.4")
    ax.text((n - 1) / 2, -0.75, "KV slot (hatched: stale K/V past the length, overwritten by the next forward)",
            ha="center", fontsize=8, color="0.4")
    ax.set(xlim=(-5.2, n + 0.8), ylim=(-0.95, 1.5))
    ax.axis("off")
    ax.set_title(f"truncate({start + keep}): keep the root + {n_accepted} accepted; nothing is erased", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def draw_timelines(plain, runs: Sequence, n_tokens: int = 32) -> Figure:
    """One `draw_timeline` panel per speculative run (each beside the same plain run), stacked on one time scale."""
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 2.6 * len(runs)), squeeze=False)
    xmax = 0.0
    for ax, run in zip(axes[:, 0], runs):
        draw_timeline(plain, run, n_tokens=n_tokens, ax=ax)
        xmax = max(xmax, ax.get_xlim()[1])
        ax.set_title(f"{run.label}: the first {n_tokens} tokens after the prompt, beside plain decoding", fontsize=10)
    for ax in axes[:, 0]:
        ax.set_xlim(0, xmax)
    fig.tight_layout()
    return fig
