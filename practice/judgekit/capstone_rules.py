"""The capstone's constructed checks: each of the learner's pieces on inputs built to reach what its rows seldom or
never meet, against the exercise's solution on the same inputs, and with its arguments checked unchanged after
the call (judgekit.guard). The rows decode a few dozen tokens from short prompts, so a piece can follow its rows'
outputs and still break a rule the decoder relies on: a deep accepted path, a second duplicate token, a level of
several frontier nodes, a far earlier occurrence, a path probability landing exactly on theta.

  01, 02  the deepest trees the rows draft: a chain of 6 drafts, [2, 1, 1, 1], an EAGLE-2 tree of 16 nodes 5 deep;
  03      a chain of 12 drafts all accepted; 8 levels of 3 siblings where two siblings carry the same token, once
          the first and once the second of them on the deeper path;
  11      the small model's draft tree [2, 2, 1] (two frontier nodes per level: their children's order);
  12      a 1000-token context whose most recent match starts 998 tokens back, an occurrence overlapping the suffix,
          tokens whose digits match across boundaries, a context shorter than n;
  13      a fixed random draft table (V = 10) from two roots, 4 and 6 levels deep;
  15      `ExactDrafter` (every draft probability exactly 0.5) at theta 0.5 and 0.25, where q == theta (only the
          stop is compared: its tied tokens may be either);
  07      one small tree, for its arguments only (the draws are the learner's; the sampled check grades the law).
A piece is checked only when it is the learner's (or a --piece file); a difference fails the check 'rules on
constructed inputs' and names the piece.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .capstone_loop import normal
from .drafters import ExactDrafter
from .gen import chain, random_tree, static_tree
from .guard import change, snapshot


@dataclass(frozen=True)
class Walk:
    """One constructed input for piece `key`: args() builds fresh arguments; what(out) is what is compared."""

    key: str
    name: str
    args: Callable[[], tuple[Any, ...]]
    what: Callable[[Any], Any] = normal


def _tensor(out: Any) -> Any:
    return (str(out.dtype), out.tolist()) if isinstance(out, torch.Tensor) else normal(out)


def _positions(out: Any) -> Any:
    return (normal(out[0]), _tensor(out[1])) if isinstance(out, tuple) and len(out) == 2 else normal(out)


def _stop(out: Any) -> Any:
    """A chain's length and parents (the exact drafter's two tied tokens may be either)."""
    out = normal(out)
    return (len(out[0]), out[1]) if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list) else out


def deep_trees(vocab: int = 64) -> list[tuple[str, list[int], list[int], torch.Tensor]]:
    """(name, tokens, parents, target_logits [n, vocab]) of trees whose target agrees along a long path: a chain of
    12 drafts, and 8 levels of 3 siblings whose agreeing child is the last, except at level 5, where the 2nd and
    3rd carry the same token and the 2nd is on the path, and at level 7, where the 1st and 2nd carry the same token
    and the 2nd is on the path (a walk into the first, or the last, matching child ends early). Every other node
    predicts token 0, which no node carries."""
    tokens, parents, path = [1], [-1], [0]
    for level in range(8):
        kids = [10 + 3 * level + j for j in range(3)]
        if level == 4:
            kids[2] = kids[1]
        if level == 6:
            kids[0] = kids[1]
        path.append(len(tokens) + (1 if level in (4, 6) else 2))
        tokens, parents = tokens + kids, parents + [path[-2]] * 3
    trees = [("a chain of 12 drafts, all accepted", list(range(1, 14)), [-1, *range(12)], list(range(13))),
             ("8 levels of 3 siblings, 8 accepted", tokens, parents, path)]
    out = []
    for name, toks, pars, agreed in trees:
        logits = torch.zeros(len(toks), vocab)
        logits[:, 0] = 1.0
        for a, b in zip(agreed, agreed[1:]):
            logits[a, 0], logits[a, toks[b]] = 0.0, 1.0
        out.append((name, toks, pars, logits))
    return out


def table_logprobs(path: list[int], vocab: int = 10) -> torch.Tensor:
    """A fixed 'draft' for piece 13: log-probs [vocab] seeded by the path, some rows confident, others unsure."""
    seed = 0
    for token in path:
        seed = (seed * 1_000_003 + int(token) + 1) % 2_147_483_647
    g = torch.Generator().manual_seed(seed)
    sharpness = 0.5 + 5.0 * torch.rand((), generator=g)
    return torch.log_softmax(torch.randn(vocab, generator=g) * sharpness, dim=-1)


def walks(small: Any, prompt: list[int]) -> list[Walk]:
    """Every constructed input, in piece order; `small` is a token-level Drafter (the small model), `prompt` a
    held-out prompt."""
    shapes = [("a chain of 6 drafts", chain(7)), ("a [2, 1, 1, 1] tree", static_tree([2, 1, 1, 1])),
              ("an EAGLE-2 tree of 16 nodes, 5 deep", random_tree(17, 3, depth_bias=0.3, levels=5))]
    far = [7, 8, 9] + [(i * 7) % 50 + 100 for i in range(995)] + [7, 8]

    def fresh(drafter: Any) -> Any:
        drafter.reset(len(prompt) + 64)
        return drafter

    out = [Walk("01", f"{name} (parents {parents})", lambda p=parents: (list(p),), _tensor) for name, parents in shapes]
    out += [Walk("02", f"{name} (parents {parents}) after 150 tokens", lambda p=parents: (list(p), 150), _positions)
            for name, parents in shapes]
    out += [Walk("03", name, lambda t=tokens, p=parents, lg=logits: (list(t), list(p), lg.clone()))
            for name, tokens, parents, logits in deep_trees()]
    out += [Walk("11", "the small model's tree [2, 2, 1] after prompt 0",
                 lambda: (fresh(small), list(prompt), prompt[-1], [2, 2, 1]))]
    out += [Walk("12", name, lambda c=context, n=n, k=k: (list(c), n, k)) for name, context, n, k in [
        ("a 1000-token context whose most recent match starts 998 tokens back", far, 2, 4),
        ("[1, 2, 1, 2, 1, 2] with n = 4 (the occurrence overlaps the suffix)", [1, 2, 1, 2, 1, 2], 4, 3),
        ("[12, 3, 5, 7, 2, 3] with n = 2 (whole tokens: [2, 3] is not inside [12, 3])", [12, 3, 5, 7, 2, 3], 2, 2),
        ("[5, 5, 5] with n = 4 (a context shorter than n: [])", [5, 5, 5], 4, 3)]]
    out += [Walk("13", f"a random draft table from root {root}, depth {depth}, top_k {top_k}, total_tokens {total}",
                 lambda r=root, d=depth, k=top_k, t=total: (r, table_logprobs, d, k, t))
            for root, depth, top_k, total in [(0, 4, 3, 12), (5, 6, 2, 12)]]
    probs = torch.tensor([[0.1, 0.1, 0.75, 0.05], [0.4, 0.1, 0.1, 0.4], [0.0] * 4, [0.0] * 4])
    out += [Walk("07", "a [2, 1] tree with V = 4 (only the arguments are compared: the draws are the learner's)",
                 lambda: ([0, 2, 1, 3], [-1, 0, 0, 1], probs.clone(), probs.flip(-1).softmax(-1),
                          torch.Generator().manual_seed(0)), lambda out: None)]
    out += [Walk("15", f"a drafter whose every draft has probability 0.5, k = {k}, theta = {theta} (q == theta "
                       f"continues)", lambda k=k, theta=theta: (ExactDrafter(), [1, 2, 3], 7, k, theta), _stop)
            for k, theta in [(4, 0.5), (6, 0.25)]]
    return out


def unchanged(before: list[Any], after: tuple[Any, ...]) -> int | None:
    """The index of the first argument the call changed (judgekit.guard's comparison), else None."""
    return next((i for i, (b, a) in enumerate(zip(before, after)) if change(b, a) is not None), None)


def snapshots(args: tuple[Any, ...]) -> list[Any]:
    return [snapshot(a) for a in args]


# Wrong files (exercises/NN-slug/wrong/) that fail their exercise but not the capstone, and why the capstone cannot
# see them: what they break is a rule of the exercise its decoder does not depend on (practice/README.md lists them;
# tests/test_capstone_wrong.py runs every other wrong file of a capstone piece and asserts the capstone fails it).
SHALLOW = "the capstone's trees are at most 6 levels deep (a chain of 6 drafts), far above 14 parent hops"
UNSEEN = {
    "01-tree-mask/wrong/fixed_hops.py": SHALLOW,
    "02-depths-positions/wrong/fixed_hops.py": SHALLOW,
    "09-compact-path/wrong/cpu_index_copy.py": "the capstone runs on the CPU, where every tensor is on the cache's device",
    "09-compact-path/wrong/first_row_only.py": "the capstone decodes one sequence at a time (a cache of one batch row)",
    "09-compact-path/wrong/lengths_one_row.py": "the capstone decodes one sequence at a time (a cache of one batch row)",
    "09-compact-path/wrong/mutates_path.py": "the loop hands keep_path its own copy of the path",
    "09-compact-path/wrong/uses_compact.py": "the capstone's cache keeps `compact` (the exercise disables it so that you "
                                             "write the move)",
    "10-tree-forward/wrong/cpu_inputs.py": "the capstone runs on the CPU, where every tensor is on the model's device",
    "10-tree-forward/wrong/forward_method_per_node.py": "the tree-forward check compares outputs; the exercise counts "
                                                       "the forward calls",
    "10-tree-forward/wrong/one_forward_per_node.py": "the tree-forward check compares outputs; the exercise counts the "
                                                    "forward calls",
    "10-tree-forward/wrong/mutates_prefix.py": "the loop hands tree_logits its own copy of the prefix",
    "11-draft-tree/wrong/root_call_first.py": "an extra drafter call leaves the drafts as they are; the exercise counts "
                                             "the calls",
    "13-eagle2-tree/wrong/rerank_tail_slice.py": "the capstone's EAGLE-2 row keeps 16 tokens; total_tokens = 0 never "
                                                "occurs",
    "13-eagle2-tree/wrong/ties_high_id.py": "the EAGLE head's float32 log-probs do not tie exactly, so no rerank tie "
                                           "occurs",
    "13-eagle2-tree/wrong/topk_tie_order.py": "the EAGLE head's float32 log-probs do not tie exactly, so no two "
                                             "children share a log-prob",
    **{f"07-tree-rejection/wrong/{name}.py": "a few hundred sampled 3-token continuations cannot see it (the law "
                                             "moves too little, or only the accepted lengths move)"
       for name in ("residual_original_q", "no_renorm", "final_from_target", "first_child_only", "two_levels",
                    "contiguous_children")},
    "07-tree-rejection/wrong/global_rng.py": "the sampled check counts continuations, not where the random numbers "
                                            "come from",
}
