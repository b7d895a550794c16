"""The tree viewer: one real greedy tree step on the model, its draft tree and the accepted path."""
from __future__ import annotations

import html
from collections.abc import Sequence

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from mini_llm import Transformer, generate

from ..core.growth import build_draft_tree
from ..core.topology import tree_node_count
from ..decoding.loop import target_forward, verify
from ..decoding.rules import VerifyRules
from ..drafters.base import Drafter
from ..drafters.model import as_drafter
from .panel import Panel, slider
from .plots import draw_tree


class _Inspected(VerifyRules):
    """The package's rules, keeping what the greedy walk saw: the accepted path and the target's argmax after every
    node."""

    def __init__(self) -> None:
        self.path: list[int] = []
        self.argmax: list[int] = []

    def accept(self, tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> tuple[list[int], int]:
        self.path, next_token = super().accept(tokens, parents, target_logits)
        self.argmax = target_logits.argmax(-1).tolist()
        return self.path, next_token


@torch.inference_mode()
def inspect_tree_step(
    target: Transformer, drafter: Drafter | Transformer, context: Sequence[int], root: int, branching: Sequence[int]
) -> dict:
    """One greedy tree step, laid open: draft a tree below `root` (after `context`), verify it in one pass (the
    package loop's `verify`).

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
    seen = _Inspected()
    step = verify(target, drafter, tree, cache, rules=seen, context=context)
    return dict(tokens=tree.tokens, parents=tree.parents, path=seen.path, next_token=int(step.next_token),
                target_argmax=seen.argmax)


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
        "step": slider("decoding step", 0, 0, max_step, 1),
        "width": slider("width (children/node)", width, 1, 4, 1),
        "depth": slider("depth (levels)", depth, 1, 5, 1),
    }
    return Panel(controls, compute, render, draw)
