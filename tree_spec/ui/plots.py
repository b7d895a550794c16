"""Pictures of token trees: the tree itself (accepted path highlighted), its attention mask, and `compact`'s KV slots."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..core.topology import children, depths, tree_mask

ACCEPTED, REJECTED, ROOT = "#2da44e", "#d0d7de", "#0969da"


def _layout(parents: Sequence[int]) -> list[tuple[float, float]]:
    """(x = depth, y) per node: leaves get consecutive rows in depth-first order, parents sit at their children's mean."""
    kids = children(parents)
    y = [0.0] * len(parents)
    next_row = 0

    def place(node: int) -> None:
        nonlocal next_row
        for child in kids[node]:
            place(child)
        if kids[node]:
            y[node] = sum(y[c] for c in kids[node]) / len(kids[node])
        else:
            y[node], next_row = float(next_row), next_row + 1

    place(0)
    return [(float(d), -yy) for d, yy in zip(depths(parents), y)]


def draw_tree(
    parents: Sequence[int], labels: Sequence[str] | None = None, accepted: Sequence[int] = (), ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Draw a tree left to right (root at the left); nodes on `accepted` (node ids) in green.

    labels: text per node (default: the node id).
    """
    xy = _layout(parents)
    labels = [str(i) for i in range(len(parents))] if labels is None else list(labels)
    on_path = set(accepted)
    if ax is None:
        rows = max(1, len({round(y, 3) for _, y in xy}))
        fig, ax = plt.subplots(figsize=(2.2 + 1.9 * max(depths(parents)), 0.8 + 0.42 * rows))
    fig = ax.figure
    for i, p in enumerate(parents):
        if p >= 0:
            good = i in on_path and p in on_path
            ax.plot([xy[p][0], xy[i][0]], [xy[p][1], xy[i][1]], color=ACCEPTED if good else "0.6",
                    lw=2.5 if good else 1, zorder=1)
    for i, (x, y) in enumerate(xy):
        color = ROOT if i == 0 else ACCEPTED if i in on_path else REJECTED
        ax.text(x, y, labels[i], ha="center", va="center", fontsize=9, family="monospace", zorder=2,
                color="white" if color != REJECTED else "black",
                bbox=dict(boxstyle="round,pad=0.3", fc=color, ec="none"))
    ax.set_xlim(-0.6, max(x for x, _ in xy) + 0.6)
    ax.set_ylim(min(y for _, y in xy) - 0.6, 0.6)
    ax.set_xticks(range(max(depths(parents)) + 1))
    ax.set_xlabel("depth (position = prefix length + depth)")
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def draw_mask(parents: Sequence[int], labels: Sequence[str] | None = None, ax: Axes | None = None) -> Figure:
    """The tree attention mask as an image: row i = what node i may attend to (itself and its ancestors)."""
    mask = tree_mask(parents, "cpu").int().numpy()
    labels = [str(i) for i in range(len(parents))] if labels is None else list(labels)
    if ax is None:
        size = 1.5 + 0.35 * len(parents)
        _, ax = plt.subplots(figsize=(size, size))
    ax.imshow(mask, cmap="Blues", vmin=0, vmax=1.3)
    ax.set_xticks(range(len(parents)), labels, rotation=90, family="monospace", fontsize=8)
    ax.set_yticks(range(len(parents)), labels, family="monospace", fontsize=8)
    ax.set(xlabel="key (attended node)", ylabel="query (node)", title="tree attention mask")
    ax.figure.tight_layout()
    return ax.figure


def draw_compact(
    slot_labels: Sequence[str], keep: Sequence[int], start: int, ax: Axes | None = None, title: str | None = None
) -> Figure:
    """KV-slot diagram of `cache.compact(start, keep)`: the verified tree's slots before, the kept path after.

    slot_labels: text of the tree's nodes in slot order (node i sits in slot start + i before);
    keep: the node ids kept, strictly increasing (the accepted path). Kept slots are green, dropped
    ones grey; an arrow moves slot start + keep[j] to slot start + j; slots past the new length are free.
    """
    n, kept = len(slot_labels), list(keep)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.6 + 0.72 * (n + 1), 2.6))
    rows = {"before": 1.0, "after": 0.0}
    for name, y in rows.items():
        ax.text(-1.0, y, f"prefix\n0..{start - 1}", ha="center", va="center", fontsize=8,
                bbox=dict(boxstyle="round,pad=0.3", fc=ROOT, ec="none", alpha=0.25))
        ax.text(-2.0, y, name, ha="right", va="center", fontsize=9, weight="bold")
    for i, label in enumerate(slot_labels):
        color = ACCEPTED if i in kept else REJECTED
        ax.text(i, 1.0, label, ha="center", va="center", fontsize=8, family="monospace",
                color="white" if color == ACCEPTED else "black", bbox=dict(boxstyle="round,pad=0.3", fc=color, ec="none"))
        after = slot_labels[kept[i]] if i < len(kept) else "free"
        ax.text(i, 0.0, after, ha="center", va="center", fontsize=8, family="monospace",
                color="white" if i < len(kept) else "0.5",
                bbox=dict(boxstyle="round,pad=0.3", fc=ACCEPTED if i < len(kept) else "white",
                          ec="none" if i < len(kept) else "0.7", ls="--"))
        ax.text(i, -0.42, str(start + i), ha="center", va="center", fontsize=7, color="0.4")
    for j, i in enumerate(kept):
        ax.annotate("", xy=(j, 0.2), xytext=(i, 0.8), arrowprops=dict(arrowstyle="->", color=ACCEPTED, lw=1.2))
    ax.text(n / 2 - 0.5, -0.7, "KV slot", ha="center", fontsize=8, color="0.4")
    ax.set_xlim(-2.6, n - 0.4)
    ax.set_ylim(-0.85, 1.4)
    ax.axis("off")
    ax.set_title(title or f"cache.compact({start}, {kept}): keep the accepted path, drop the branches")
    ax.figure.tight_layout()
    return ax.figure


TIMELINE_COLORS = {"decode": "#6e7781", "draft": "#bf8700", "verify": "#0969da"}


def draw_timeline(plain, speculative, n_tokens: int = 24, ax: Axes | None = None) -> Figure:
    """Gantt chart of two measured `tree_spec.timeline.Timeline`s, from the end of each prefill until each has
    committed `n_tokens` tokens: plain decoding (one bar per token) above, draft bars + one verify bar per step
    below, each verify labelled with the tokens it committed. Gaps between bars are the loop's own overhead."""
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 2.8))
    ends = {}
    for y, timeline in [(1, plain), (0, speculative)]:
        spans = [s for s in timeline.spans if s.kind != "prefill"]
        origin, done = spans[0].start_ms, 0
        for span in spans:
            x = span.start_ms - origin
            ax.broken_barh([(x, span.ms)], (y - 0.3, 0.6), facecolors=TIMELINE_COLORS[span.kind], edgecolor="white", lw=0.5)
            if span.kind == "verify":
                ax.text(x + span.ms / 2, y + 0.38, f"+{span.tokens}", ha="center", va="bottom", fontsize=7)
            done += span.tokens
            if done >= n_tokens:
                break
        ends[y] = x + span.ms  # where this lane stops: at n_tokens, or at its last span if it has fewer
        ax.text(ends[y], y, f"  {done} tokens, {ends[y]:.0f} ms", va="center", fontsize=8)
    ax.set_yticks([1, 0], [plain.label, speculative.label])
    ax.set(xlabel="thread CPU ms after the prefill", ylim=(-0.6, 1.7), xlim=(0, max(ends.values(), default=1) * 1.18))
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in TIMELINE_COLORS.values()]
    ax.legend(handles, ["target decode (1 token)", "draft call", "target verify (k + 1 tokens)"], fontsize=8,
              loc="upper right", ncol=3)
    ax.set_title(f"measured timeline: the first {n_tokens} tokens after the prompt")
    ax.figure.tight_layout()
    return ax.figure


def draw_eagle_inputs(labels: Sequence[str], draft_label: str = "?", ax: Axes | None = None) -> Figure:
    """EAGLE's input sequence: the target's feature of token t is paired with the embedding of token t + 1.

    labels: the last few committed tokens, then the root (the target's newest token, not yet in its cache).
    Row 1: tokens; row 2: the target's features f_t (none yet for the root); row 3: the head's pairs
    [f_t ⊕ e(t+1)] at position t + 1 (the shift is the diagonal arrow); row 4: what each pair predicts
    through the target's own final norm + LM head. `draft_label`: the first drafted token, shown last.
    """
    n = len(labels)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.55 * n + 2.2, 4.2))
    box = dict(boxstyle="round,pad=0.3", ec="none")
    rows = {"token": 3.0, "feature": 2.0, "pair": 1.0, "predicts": 0.0}
    for name, y in rows.items():
        ax.text(-0.9, y, {"token": "token t", "feature": "target feature", "pair": "head input\n(position t+1)",
                          "predicts": "head → target's\nnorm + LM head"}[name], ha="right", va="center", fontsize=9)
    arrow = dict(arrowstyle="->", color="0.45", lw=1)
    for i, label in enumerate(labels):
        root = i == n - 1
        ax.text(i, rows["token"], label, ha="center", va="center", family="monospace", fontsize=9,
                bbox={**box, "fc": ROOT if root else "#ddf4ff"}, color="white" if root else "black")
        if not root:  # the root's feature does not exist yet: the target has not run on it
            ax.text(i, rows["feature"], f"f{i}", ha="center", va="center", fontsize=9, bbox={**box, "fc": "#fff8c5"})
            ax.annotate("", (i, rows["feature"] + 0.2), (i, rows["token"] - 0.2), arrowprops=arrow)
        if i:  # pair i-1 -> i: feature of token i-1 (diagonal: the shift) with the embedding of token i
            ax.text(i, rows["pair"], f"[f{i - 1} ⊕ e({label.strip() or '·'})]", ha="center", va="center", fontsize=8,
                    family="monospace", bbox={**box, "fc": "#ffebe9" if root else "#f6f8fa"})
            ax.annotate("", (i - 0.15, rows["pair"] + 0.2), (i - 1, rows["feature"] - 0.2),
                        arrowprops={**arrow, "color": "tab:red"})
            ax.annotate("", (i + 0.3, rows["pair"] + 0.2), (i + 0.3, rows["token"] - 0.2),  # beside the feature box
                        arrowprops={**arrow, "ls": ":"})
            nxt = labels[i + 1] if i + 1 < n else draft_label
            ax.text(i, rows["predicts"], f"f̂{i} → '{nxt}'", ha="center", va="center", fontsize=8, family="monospace",
                    bbox={**box, "fc": ACCEPTED if root else "#eeeeee"}, color="white" if root else "black")
            ax.annotate("", (i, rows["predicts"] + 0.2), (i, rows["pair"] - 0.2), arrowprops=arrow)
    ax.set_xlim(-2.6, n - 0.4)
    ax.set_ylim(-0.6, 3.5)
    ax.axis("off")
    ax.set_title("EAGLE's inputs: feature of token t (red arrow) ⊕ embedding of token t+1; "
                 "the last pair (root) drafts the first token", fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def draw_dynamic_growth(
    parents: Sequence[int], scores: Sequence[float], expanded: Sequence[Sequence[int]], kept: Sequence[int],
    labels: Sequence[str] | None = None, accepted: Sequence[int] = (),
) -> Figure:
    """EAGLE-2's tree growing level by level, then reranked, drawn at (depth, cumulative draft log-prob).

    parents / scores: every candidate node (node 0 = root, score 0); expanded[l]: the nodes whose children
    were drafted at level l + 1; kept: the nodes the rerank keeps (root included); labels: text per node
    (drawn for kept nodes); accepted: kept nodes on the target's accepted path (green). One panel per
    level (the newest level's top-k, which will be expanded next, ringed), then the reranked tree:
    kept nodes in blue, dropped ones grey, the cutoff score dashed and the depth where growth stopped
    dotted, both named in a legend.
    """
    depth = depths(parents)
    levels = len(expanded)
    cols = min(4, levels + 1)
    rows = -(-(levels + 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), sharex=True, sharey=True, squeeze=False)
    kept_set, on_path = set(kept), set(accepted)
    cutoff = min(scores[i] for i in kept if i) if len(kept) > 1 else 0.0
    for panel, ax in enumerate(axes.flat):
        if panel > levels:
            ax.axis("off")
            continue
        final = panel == levels
        shown = [i for i in range(len(parents)) if depth[i] <= (levels if final else panel + 1)]
        for i in shown[1:]:
            p = parents[i]
            color = ACCEPTED if final and i in on_path else ROOT if final and i in kept_set else "0.75"
            ax.plot([depth[p], depth[i]], [scores[p], scores[i]], color=color, lw=1.6 if color != "0.75" else 0.7,
                    zorder=1)
        colors = [(ACCEPTED if i in on_path else ROOT if i in kept_set else "0.7") if final else "0.35" for i in shown]
        ax.scatter([depth[i] for i in shown], [scores[i] for i in shown], s=14, c=colors, zorder=2)
        if not final:
            ring = expanded[panel + 1] if panel + 1 < levels else []
            ax.scatter([depth[i] for i in ring], [scores[i] for i in ring], s=70, facecolors="none",
                       edgecolors="tab:orange", lw=1.5, zorder=3)
            ax.set_title(f"level {panel + 1}: {len(expanded[panel])} node(s) expanded"
                         + (f"; top-{len(ring)} ringed" if ring else ""), fontsize=9)
        else:
            ax.axhline(cutoff, color="tab:red", ls="--", lw=1, label=f"cutoff {cutoff:.2f}: the lowest kept score")
            ax.axvline(levels, color="0.4", ls=":", lw=1, label=f"growth stops at depth {levels}")
            ax.legend(loc="lower left", fontsize=7)
            ax.set_title(f"rerank: keep the {len(kept) - 1} best of {len(parents) - 1} (blue; green = accepted)",
                         fontsize=9)
            if labels is not None:
                for i in kept[1:]:
                    ax.annotate(labels[i], (depth[i], scores[i]), fontsize=6, family="monospace",
                                xytext=(3, 2), textcoords="offset points")
        ax.set_xlabel("depth")
        ax.set_ylabel("cumulative draft log-prob")
    fig.tight_layout()
    return fig


def draw_head_training(logs: dict[str, dict]) -> Figure:
    """Held-out τ (chains) of head training runs vs training step and vs training minutes.

    logs: name -> `train_log.json` contents; minutes per evaluation = its step × the run's seconds per step."""
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for name, log in logs.items():
        steps = [e["step"] for e in log["evals"]]
        taus = [e["tau"] for e in log["evals"]]
        pace = log["train_seconds"] / log["steps"] / 60
        by_step.plot(steps, taus, marker=".", label=f"{name} ({log['steps']} steps)")
        by_time.plot([s * pace for s in steps], taus, marker=".", label=f"{name} ({log['train_seconds'] / 60:.1f} min)")
    by_step.set(xlabel="training step", ylabel="held-out τ (chain of 5 drafts)", title="equal steps")
    by_time.set(xlabel="training minutes (even pace assumed)", title="equal wall time")
    for ax in (by_step, by_time):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def draw_chain_step(prefix: str, drafts: Sequence[str], n_accepted: int, correction: str, ax: Axes | None = None) -> Figure:
    """One chain step as three rows: the draft's k guesses, the target's single verify pass, what gets committed.

    The first n_accepted drafts are accepted (green); the next one is rejected (red) and replaced by `correction`
    (orange, from the residual); later drafts and the target's bonus row are dropped (grey). With n_accepted == k
    every draft is kept and the bonus row supplies the extra token.
    """
    green, red, orange, grey, blue = "#2da44e", "#cf222e", "#bf8700", "#d0d7de", "#0969da"
    k = len(drafts)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.6))

    def box(x, y, text, color, fg="white", w=0.9):
        ax.text(x, y, text, ha="center", va="center", color=fg, fontsize=10, family="monospace",
                bbox=dict(boxstyle="round,pad=0.35", fc=color, ec="none"))

    rows = {2: f"draft: {k} cheap forwards", 1: f"target: ONE forward,\n{k + 1} distributions", 0: "committed"}
    for y, label in rows.items():
        ax.text(-1.1, y, label, ha="right", va="center", fontsize=9)
        box(0, y, prefix, blue)
    for i, draft in enumerate(drafts, start=1):
        accepted, rejected = i <= n_accepted, i == n_accepted + 1
        box(i + 0.3, 2, repr(draft), green if accepted else red if rejected else grey)
        if accepted or rejected:
            box(i + 0.3, 1, "✓ accept" if accepted else "✗ reject", green if accepted else red)
            box(i + 0.3, 0, repr(draft) if accepted else repr(correction), green if accepted else orange)
    bonus_used = n_accepted == k
    box(k + 1.3, 1, "bonus row:\n" + ("used" if bonus_used else "dropped"), blue if bonus_used else grey,
        fg="white" if bonus_used else "black")
    if bonus_used:
        box(k + 1.3, 0, repr(correction), blue)
    ax.text(k + 2.3, 0, f"+{n_accepted + 1} tokens\nfor 1 target pass", ha="center", va="center", fontsize=10,
            weight="bold")
    if not bonus_used:
        ax.text(n_accepted + 1.3, -0.55, "from residual\nnorm(max(0, target − draft))", ha="center", va="top",
                fontsize=8, color=orange)
    ax.set(xlim=(-3.2, k + 3.2), ylim=(-1.2, 2.5))
    ax.axis("off")
    ax.set_title(f"one speculative step: {k} drafted, {n_accepted} accepted, then the target's own token")
    ax.figure.tight_layout()
    return ax.figure
