"""Draft tree from a ModelDrafter on the real model: tokens, parents exact; one call per level.

Mistakes modelled: parent = frontier position, children lowest-first, only the first frontier node expanded, the new
nodes rank-major instead of frontier-major.
Drafter calls are counted by a wrapper around `next_logits` whose count the learner's code cannot reach.

"branching [80]": one level of WIDE = 80 children. For k * 64 > V (4096 here) torch's CPU topk switches from a
partial sort to nth_element, so `topk(..., sorted=False)` returns the top k in no particular order (below that it
happens to come out sorted, and the other cases cannot see it). This case checks the order explicitly: the
children must be the top 80 of the logits row the drafter returned to the learner's own call (recorded by the
same wrapper), from the highest logit down (ties in either order). It is checked against that row, not against
the recorded tokens, so it holds on any device: among 80 of 4096 logits a GPU's rounding could swap two close
neighbours of the CPU reference, and an exact comparison would fail a correct solution there.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.guard import count_calls
from practice.judgekit.compare import describe, int_mismatch, tokens_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from practice.judgekit.values import as_ints, ints_problem
from tree_spec import ModelDrafter

FUNCTIONS = ("build_tree",)
NEEDS_MODEL = True
CONTEXT = [112, 9, 3020, 44, 871, 15, 266]
ROOT = 530


WIDE = 80
BRANCHINGS = ([2, 2, 1, 1], [3, 1], [1, 1, 1], [], [1, 1, 1, 1, 1, 1], [6], [2, 3, 2], [1, 4, 1, 2], [WIDE])
RULES = {
    "one drafter call per level": [f"branching {b}" for b in BRANCHINGS],
    "every frontier node gets its top-w_l children": ["branching [2, 2, 1, 1]", "branching [2, 3, 2]"],
    "children from the highest logit down": ["branching [3, 1]", "branching [6]", f"branching [{WIDE}]"],
    "a child's parent is the frontier node's id": ["branching [2, 2, 1, 1]", "branching [1, 4, 1, 2]"],
    "new frontier = the nodes just added, in order": ["branching [2, 3, 2]", "branching [1, 4, 1, 2]"],
    "new nodes frontier-major: each frontier node's children together, in frontier order": [
        "branching [2, 2, 1, 1]", "branching [2, 3, 2]", "branching [1, 4, 1, 2]"],
    "an empty branching: the root alone, no call": ["branching []"],
    "any number of levels": ["branching [1, 1, 1, 1, 1, 1]"],
    "context and branching are not modified (checked after every call)": ["branching [2, 2, 1, 1]"],
}
LIMITS = [Limit("six levels of 1", 6, lambda c: len(c.args["branching"])),
          Limit("[80]", WIDE, lambda c: max(c.args["branching"], default=0))]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"branching {b}", {"branching": b}, f"context of {len(CONTEXT)} tokens, root {ROOT}"
                 + (f"; the {WIDE} children are checked against the drafter's logits: its top {WIDE}, highest "
                    f"first" if b == [WIDE] else "")) for b in BRANCHINGS]


def _order_problem(tokens, row, width) -> str | None:
    """None when tokens[1:] are the top `width` of the logits `row`, from the highest down (ties in any order)."""
    kids, row = tokens[1:], row.detach().double().cpu()
    if len(kids) != width or len(set(kids)) != width or not all(isinstance(t, int) and 0 <= t < len(row)
                                                                  for t in kids):
        return f"the root's children must be {width} distinct token ids, got {len(kids)} ({len(set(kids))} distinct)."
    chosen = row[kids]
    others = row.clone()
    others[kids] = float("-inf")
    best_other = int(others.argmax())
    if chosen.min() < others[best_other]:
        low = kids[int(chosen.argmin())]
        return (f"token {low} (logit {row[low].item():.4f}) is a child but token {best_other} (logit "
                f"{row[best_other].item():.4f}) is not: the children are the top {width} logits.")
    drops = (chosen[1:] > chosen[:-1]).nonzero()
    if len(drops):
        i = int(drops[0])
        return (f"children are not from the highest logit down: node {i + 1} (token {kids[i]}, logit "
                f"{chosen[i].item():.4f}) comes before node {i + 2} (token {kids[i + 1]}, logit "
                f"{chosen[i + 1].item():.4f}). topk(..., sorted=True), the default, returns them in that order; "
                f"with sorted=False the order is unspecified (on a CPU it is unsorted once k * 64 > V).")
    return None


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> {tokens, parents, calls} or a str when the result is not (list, list)."""
    drafter = ModelDrafter(ctx.model())
    drafter.reset(64)
    calls = count_calls(drafter, "next_logits", "next_top")
    seen, counted = [], drafter.next_logits

    def recording(*args, **kwargs):  # the logits handed to the learner, copied before its code can touch them
        logits = counted(*args, **kwargs)
        seen.append(logits.detach().clone())
        return logits

    drafter.next_logits = recording
    out = fns.build_tree(drafter, list(CONTEXT), ROOT, list(case.args["branching"]))
    if not (isinstance(out, tuple) and len(out) == 2):
        return f"build_tree must return (tokens, parents), got {describe(out)}."
    got = {"tokens": out[0], "parents": out[1], "calls": len(calls)}
    if case.args["branching"] == [WIDE]:
        tokens = as_ints(out[0])
        if tokens is None:
            got["order"] = ints_problem(out[0], "tokens")
        else:  # with another number of calls than 1, the call count fails the case first
            got["order"] = _order_problem(tokens, seen[0][0], WIDE) if len(seen) == 1 else None
    return got


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    if case.args["branching"] == [WIDE]:  # the order is checked against the learner's own logits (see above)
        return (tokens_mismatch(got["parents"], expected["parents"], "parents")
                or int_mismatch(got["calls"], expected["calls"], "drafter calls (one per level)")
                or (None if got.get("order") == expected.get("order") else got.get("order")
                    or f"the children do not match: {expected.get('order')}"))
    problem = tokens_mismatch(got["parents"], expected["parents"], "parents") or tokens_mismatch(
        got["tokens"], expected["tokens"], "tokens")
    if problem:
        return problem
    return int_mismatch(got["calls"], expected["calls"], "drafter calls (one per level)")


def _grow(drafter, context, root, branching, parent_of, order, expand_first_only=False, rank_major=False):
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, frontier)
        kids = order(logits, width)
        pairs = [(j, node, token) for j, (node, row) in enumerate(zip(frontier, kids)) for token in row]
        if rank_major:  # every frontier node's best child first, then every second-best, ...
            pairs = [pairs[j * width + r] for r in range(width) for j in range(len(frontier))]
        new = []
        for j, node, token in pairs:
            if expand_first_only and j > 0:
                break
            new.append(len(tokens))
            tokens.append(token)
            parents.append(parent_of(node, j))
        frontier = new
    return tokens, parents


def _top(logits, width):
    return logits.topk(width, dim=-1).indices.tolist()


MISTAKES = [
    Mistake("a child's parent must be the frontier node's id in tokens, not its position in the frontier list.",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: j, _top)}),
    Mistake("children are in increasing logit order; take them from the highest logit down (topk order).",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: node,
                                                    lambda lg, w: lg.topk(w, dim=-1).indices.flip(-1).tolist())}),
    Mistake("only the first frontier node was expanded; every frontier node gets its top-w children.",
            {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: node, _top, True)}),
    Mistake("the level's new nodes are rank-major (every frontier node's best child, then every second-best); they "
            "are frontier-major: all children of the first frontier node (highest logit first), then all of the "
            "second's, ...", {"build_tree": lambda d, c, r, b: _grow(d, c, r, b, lambda node, j: node, _top,
                                                                    rank_major=True)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [3, 2, 1, 5])  # the README rule each mistake breaks
