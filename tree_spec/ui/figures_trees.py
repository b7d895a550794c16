"""Figures for notebooks 02 and 03: the flattened tree and its [n, P + n] mask, chain vs tree reach by level,
tree rejection sampling sibling by sibling, and Medusa / EAGLE / MTP side by side.

Every function draws what it is given (numbers from a real run) and returns a matplotlib Figure; none imports
pyplot, so a notebook's backend is left alone. Colours: the Okabe-Ito palette (colour-blind safe).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from ..core.topology import depths, tree_mask

OKABE_ITO = {"orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442",
             "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000"}


def draw_flat_tree_mask(parents: Sequence[int], labels: Sequence[str], prefix_len: int,
                        shown_prefix: int = 3) -> Figure:
    """Top: the tree flattened into one sequence (node index, token, RoPE position = prefix_len + depth, an arc
    to each parent). Bottom: the full [n, P + n] attention mask of the verify pass: the prefix block (every
    node reads all P cached slots; `shown_prefix` columns drawn for them) joined with the tree mask. Its rows
    and tree columns are labelled "index token", so cell (i, j) reads: node i sees node j."""
    n, depth, anc = len(parents), depths(parents), tree_mask(parents).tolist()
    fig = Figure(figsize=(max(7.0, 0.55 * (n + shown_prefix) + 2), 6.4))
    top, bottom = fig.subplots(2, 1, gridspec_kw=dict(height_ratios=[1, 2.4]))
    for i in range(n):
        top.add_patch(Rectangle((i - 0.45, -0.45), 0.9, 0.9, color=OKABE_ITO["blue" if i else "orange"], alpha=0.85))
        top.text(i, 0, labels[i], ha="center", va="center", fontsize=7, color="white", rotation=90)
        top.text(i, -0.75, f"{i}", ha="center", va="top", fontsize=7)
        top.text(i, -1.25, f"{prefix_len + depth[i]}", ha="center", va="top", fontsize=7, color=OKABE_ITO["vermillion"])
        if parents[i] >= 0:
            p = parents[i]
            top.annotate("", xy=(i, 0.48), xytext=(p, 0.48), arrowprops=dict(
                arrowstyle="->", color=OKABE_ITO["green"], lw=0.9, connectionstyle=f"arc3,rad={-0.35 if i - p > 1 else -0.6}"))
    top.text(-0.6, -0.75, "node", ha="right", va="top", fontsize=7)
    top.text(-0.6, -1.25, "position", ha="right", va="top", fontsize=7, color=OKABE_ITO["vermillion"])
    top.set(xlim=(-2.2, n - 0.4), ylim=(-1.8, 1.8), title="the tree as one sequence (arcs: parent → child)")
    top.axis("off")
    cols = shown_prefix + n
    for i in range(n):
        for j in range(cols):
            seen = True if j < shown_prefix else anc[i][j - shown_prefix]
            colour = OKABE_ITO["sky"] if j < shown_prefix else OKABE_ITO["blue"]
            bottom.add_patch(Rectangle((j, i), 1, 1, facecolor=colour if seen else "white", edgecolor="0.85", lw=0.5))
    bottom.axvline(shown_prefix, color=OKABE_ITO["black"], lw=1.2)
    node = [f"{i} {labels[i]}" for i in range(n)]  # rows and columns read "node index token"
    bottom.set_xticks([j + 0.5 for j in range(cols)],
                      [f"slot {prefix_len - shown_prefix + j}" if j < shown_prefix else node[j - shown_prefix]
                       for j in range(cols)], rotation=90, fontsize=7)
    bottom.set_yticks([i + 0.5 for i in range(n)], node, fontsize=7)
    bottom.set(xlim=(0, cols), ylim=(n, 0), xlabel=f"key: cached prefix (P = {prefix_len} slots, last {shown_prefix} "
               f"shown) | key node (index, token)", ylabel="query node (index, token)",
               title=f"the [n, P + n] = [{n}, {prefix_len + n}] mask: prefix block all visible, then tree_mask")
    fig.tight_layout()
    return fig


def draw_reach(reach: Mapping[str, Sequence[float]], nodes: Mapping[str, int] | None = None,
               title: str = "how deep a step is accepted") -> Figure:
    """Fraction of steps accepted down to each level, one line per shape (`reach[name]` = [level 1, 2, ...])."""
    fig = Figure(figsize=(6.0, 3.6))
    ax = fig.subplots()
    colours = [OKABE_ITO[c] for c in ("vermillion", "blue", "green", "purple", "orange")]
    for (name, values), colour in zip(reach.items(), colours * 4):
        extra = f", {nodes[name]} nodes" if nodes and name in nodes else ""
        ax.plot(range(1, len(values) + 1), list(values), "o-", color=colour, label=f"{name}{extra}")
    ax.set(xlabel="draft level", ylabel="fraction of steps reaching it", ylim=(0, 1.05), title=title)
    ax.set_xticks(range(1, max(len(v) for v in reach.values()) + 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def draw_sibling_rejection(stages: Sequence[Mapping], labels: Sequence[str] | None = None) -> Figure:
    """One panel per tried child: the target's distribution (bars) and the draft's (outline) it was judged
    against, the tried token marked. stage = dict(target=[V], draft=[V], token=int, accepted=bool); a last
    stage with token=None shows the distribution the next token is sampled from after every rejection."""
    k = len(stages)
    fig = Figure(figsize=(3.1 * k, 3.0))
    axes = fig.subplots(1, k, sharey=True, squeeze=False)[0]
    for s, (ax, st) in enumerate(zip(axes, stages)):
        target, draft = [float(x) for x in st["target"]], [float(x) for x in st["draft"]]
        xs = range(len(target))
        ax.bar(xs, target, color=OKABE_ITO["sky"], label="target (residual after a rejection)")
        if st.get("token") is not None:
            ax.step([x - 0.5 for x in xs] + [len(target) - 0.5], draft + [draft[-1]], where="post",
                    color=OKABE_ITO["vermillion"], lw=1.3, label="draft (tried tokens removed)")
            x = st["token"]
            colour = OKABE_ITO["green"] if st["accepted"] else OKABE_ITO["black"]
            ax.bar([x], [target[x]], color="none", edgecolor=colour, lw=2.2, hatch="//")
            verdict = "accepted" if st["accepted"] else "rejected"
            ax.set_title(f"child {s + 1}: token {labels[x] if labels else x} {verdict}\n"
                         f"min(1, {target[x]:.2f} / {draft[x]:.2f})", fontsize=8)
        else:
            ax.set_title("all rejected: sample the\nnext token from this residual", fontsize=8)
        ax.set_xticks(list(xs), list(labels) if labels else [str(x) for x in xs], fontsize=7)
    axes[0].set_ylabel("probability")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def draw_draft_heads(facts: Mapping[str, Mapping[str, str]]) -> Figure:
    """Medusa / EAGLE / MTP side by side: what each reads (bottom), its trained part (middle), what it
    predicts (top). facts[name] = dict(reads=..., block=..., predicts=..., note=...), e.g. with measured
    parameter counts and τ in `note`."""
    fig = Figure(figsize=(4.0 * len(facts), 4.2))
    axes = fig.subplots(1, len(facts), squeeze=False)[0]
    colours = {"reads": OKABE_ITO["sky"], "block": OKABE_ITO["orange"], "predicts": OKABE_ITO["green"]}
    for ax, (name, f) in zip(axes, facts.items()):
        for y, part in ((0.12, "reads"), (0.45, "block"), (0.78, "predicts")):
            ax.add_patch(FancyBboxPatch((0.05, y - 0.1), 0.9, 0.2, boxstyle="round,pad=0.01",
                                        facecolor=colours[part], alpha=0.55, edgecolor="0.3"))
            ax.text(0.5, y, f[part], ha="center", va="center", fontsize=8, wrap=True)
        for y0, y1 in ((0.22, 0.35), (0.55, 0.68)):
            ax.annotate("", xy=(0.5, y1), xytext=(0.5, y0), arrowprops=dict(arrowstyle="->", lw=1.2))
        ax.text(0.5, 0.99, name, ha="center", va="top", fontsize=11, weight="bold")
        ax.text(0.5, -0.03, f.get("note", ""), ha="center", va="top", fontsize=7.5)
        ax.set(xlim=(0, 1), ylim=(-0.12, 1.0))
        ax.axis("off")
    fig.tight_layout()
    return fig
