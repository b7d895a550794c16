"""Figures for notebook 03: one pass of lookahead decoding (its Jacobi window, the n-grams it adds to the pool, the
trie of window + pool candidates that the target verifies in one pass) and the attention masks of EAGLE-3's
training-time test, step by step.

Each function draws what it is given (tokens from a real run, masks from `train_heads.ttt_mask`) and returns a
matplotlib Figure without pyplot, so a notebook's backend is left alone. Colours: the Okabe-Ito palette
(colour-blind safe).
"""
from __future__ import annotations

from collections.abc import Sequence

from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from .figures_trees import OKABE_ITO
from .plots import _layout

WINDOW, POOL, ACCEPT, PLAIN = OKABE_ITO["sky"], OKABE_ITO["orange"], OKABE_ITO["green"], "#eeeeee"


def _box(ax, x, y, text, colour, edge="0.4", lw=0.8):
    ax.text(x, y, text, ha="center", va="center", fontsize=8, family="monospace",
            bbox=dict(boxstyle="round,pad=0.3", fc=colour, ec=edge, lw=lw))


def draw_lookahead_step(
    labels: Sequence[str], parents: Sequence[int], window: Sequence[int], predicted: Sequence[str],
    grams: Sequence[tuple[str, Sequence[str]]], accepted: Sequence[int] = (),
) -> Figure:
    """One lookahead pass in three panels.

    labels / parents: the trie verified in the pass (node 0 = the root); window: the node ids of the window's
    guesses, in order (a chain below the root); the trie's other nodes are the pool's candidates for the root;
    predicted: the target's argmax after the root and after each guess (len(window) + 1 texts: the Jacobi step);
    grams: the n-grams this pass puts in the pool, as (key, continuation); accepted: the accepted path (node ids,
    root first). Left: each guess above the target's argmax after it (the Jacobi step; a dashed arrow: the
    argmax becomes the next pass's guess one place on). Middle: the n-grams entering the pool. Right: the trie of
    window (blue) and pool candidates (orange) verified in one pass, accepted nodes ringed green.
    """
    if len(predicted) != len(window) + 1:
        raise ValueError(f"predicted needs one entry per window node plus the root: {len(window) + 1}, "
                         f"got {len(predicted)}")
    on_path, in_window = set(accepted), set(window)
    fig = Figure(figsize=(13, 3.8))
    left, middle, right = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[1.3, 0.9, 1.3]))

    columns = [0, *window]
    for j, node in enumerate(columns):
        colour = PLAIN if j == 0 else WINDOW
        edge, lw = (ACCEPT, 2.5) if j and node in on_path else ("0.4", 0.8)
        _box(left, j, 1, labels[node], colour, edge, lw)
        _box(left, j, 0, predicted[j], PLAIN)
        left.annotate("", (j, 0.22), (j, 0.78), arrowprops=dict(arrowstyle="->", lw=1))
        if j + 1 < len(columns):
            left.annotate("", (j + 1 - 0.25, 0.78), (j + 0.25, 0.22),
                          arrowprops=dict(arrowstyle="->", lw=0.8, ls="--", color="0.5"))
    left.text(-0.6, 1, "window", ha="right", va="center", fontsize=9)
    left.text(-0.6, 0, "target's\nargmax", ha="right", va="center", fontsize=9)
    left.set(xlim=(-1.9, len(columns) - 0.4), ylim=(-0.6, 1.6))
    left.set_title("root + window of guesses; below: the target's argmax after each\n"
                   "(dashed: it replaces the next guess; green ring: accepted)", fontsize=9)
    left.axis("off")

    for row, (key, continuation) in enumerate(grams):
        _box(middle, 0, -row, key, WINDOW)
        middle.text(0.55, -row, "→", ha="center", va="center", fontsize=10)
        for i, token in enumerate(continuation):
            _box(middle, 1.2 + 1.1 * i, -row, token, POOL)
    longest = max((len(c) for _, c in grams), default=1)
    middle.set(xlim=(-0.8, 1.2 + 1.1 * longest), ylim=(-max(len(grams), 1) + 0.4, 0.8))
    middle.set_title(f"{len(grams)} n-gram(s) into the pool:\nkey (a guess) → the target's argmaxes", fontsize=9)
    middle.axis("off")

    xy = _layout(parents)
    for i in range(1, len(parents)):
        (x0, y0), (x1, y1) = xy[parents[i]], xy[i]
        both = i in on_path and parents[i] in on_path
        right.plot([x0, x1], [y0, y1], color=ACCEPT if both else "0.6", lw=2.2 if both else 0.9, zorder=1)
    for i, (x, y) in enumerate(xy):
        colour = PLAIN if i == 0 else WINDOW if i in in_window else POOL
        edge, lw = (ACCEPT, 2.5) if i and i in on_path else ("0.4", 0.8)
        _box(right, x, y, labels[i], colour, edge, lw)
    ys = [y for _, y in xy]
    right.set(xlim=(-0.6, max(x for x, _ in xy) + 0.6), ylim=(min(ys) - 0.6, max(ys) + 0.6))
    right.set_title("verified in ONE pass: window (blue) + the pool's\ncandidates for the root (orange)", fontsize=9)
    right.axis("off")
    fig.tight_layout()
    return fig


def draw_ttt_masks(masks: Sequence) -> Figure:
    """The attention mask of each unrolled training-time-test step side by side.

    masks[s - 1]: step s's boolean mask [n, s * n] (e.g. `train_heads.ttt_mask(n, s)`): row i is pair i, the keys
    come in s blocks of n (the true pairs, then the outputs of steps 2..s). A filled cell: pair i reads that key.
    Rows are labelled by pair index, keys by pair index within their block, and each block is named above it."""
    rows = [[[bool(v) for v in row] for row in mask] for mask in masks]
    n = len(rows[0])
    for s, mask in enumerate(rows, start=1):
        if len(mask) != n or any(len(row) != s * n for row in mask):
            raise ValueError(f"step {s}'s mask must be [{n}, {s * n}]")
    fig = Figure(figsize=(0.42 * n * sum(range(1, len(rows) + 1)) + 2.5, 0.42 * n + 1.6))
    axes = fig.subplots(1, len(rows), squeeze=False, gridspec_kw=dict(width_ratios=range(1, len(rows) + 1)))[0]
    colours = ListedColormap(["white", OKABE_ITO["blue"]])
    for s, (ax, mask) in enumerate(zip(axes, rows), start=1):
        ax.imshow(mask, cmap=colours, vmin=0, vmax=1, aspect="equal")
        ax.set_xticks(range(s * n), [str(k % n) for k in range(s * n)], fontsize=7)
        ax.set_yticks(range(n), [f"pair {i}" for i in range(n)], fontsize=7)
        ax.set_xticks([k - 0.5 for k in range(s * n + 1)], minor=True)
        ax.set_yticks([i - 0.5 for i in range(n + 1)], minor=True)
        ax.grid(which="minor", color="0.85", lw=0.5)
        ax.tick_params(which="minor", length=0)
        for b in range(s):
            if b:
                ax.axvline(b * n - 0.5, color="black", lw=2)
            ax.text(b * n + (n - 1) / 2, 1.01, "true pairs" if b == 0 else f"step {b + 1} out",
                    ha="center", va="bottom", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_title(f"unrolled step {s}", fontsize=9, pad=14)
        ax.set_xlabel("key (pair index in its block)", fontsize=7)
    fig.tight_layout()
    return fig
