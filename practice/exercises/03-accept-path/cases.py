"""Greedy tree acceptance, compared exactly: the path to the deepest accepted node (the lowest id among equally
deep ones), the rule of tree_spec.core.accept. Mistakes: the child's own row, tokens instead of ids, no root, a
walk into the first (or the last) matching child, a search 4 levels deep."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tokens_mismatch
from practice.judgekit.gen import DEEPEST, chain, deepest_path, random_tree, static_tree
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from tree_spec.core.accept import accept_greedy
from tree_spec.core.topology import children, depths

FUNCTIONS = ("accept_greedy",)
NEEDS_MODEL = False
VOCAB = 16
WIDE = [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10]


DEEP, BIG = random_tree(20, 8, depth_bias=0.7), random_tree(70, 9, depth_bias=0.3, levels=DEEPEST)
# (name, parents, nodes whose token is set to the target's argmax at their parent, seed)
SETUPS = [
    ("nothing accepted", WIDE, [], 0),
    ("full depth via the second child", WIDE, [2, 6, 10, 14], 1),
    ("stops mid-tree", WIDE, [1, 3, 12], 2),
    ("chain", [-1, 0, 1, 2, 3, 4], [1, 2, 3], 3),
    ("same token twice: the deeper branch wins", WIDE, [1, 2, 6, 10], 4),  # nodes 1 and 2 carry one token
    ("same token twice, equally deep: the lower id wins", WIDE, [1, 2, 3, 6], 10),  # nodes 3 and 6 at depth 2
    ("single node", [-1], [], 5),
    ("deep chain of 9, all accepted", chain(9), list(range(1, 9)), 6),
    ("static [3, 3, 2] tree, last branch accepted", static_tree([3, 3, 2]), [3, 12, 30], 7),
    ("deep random tree of 20", DEEP, deepest_path(DEEP)[1:], 8),
    (f"random tree of 70, {DEEPEST} levels", BIG, deepest_path(BIG)[1:] + list(range(1, 70, 4)), 9),
]
RULES = {
    "a child is checked against its parent's row": ["full depth via the second child", "stops mid-tree", "chain"],
    "the path holds node ids, starting with the root 0": [name for name, *_ in SETUPS],
    "stop when no child matches": ["nothing accepted", "stops mid-tree", "single node"],
    "the path ends at the deepest accepted node (a sibling with the same token may lead deeper)": [
        "same token twice: the deeper branch wins"],
    "among equally deep accepted nodes, the lowest id": ["same token twice, equally deep: the lower id wins"],
    "any depth (no fixed limit)": ["deep chain of 9, all accepted", "deep random tree of 20",
                                   f"random tree of 70, {DEEPEST} levels"],
    "a one-node tree": ["single node"],
    "tokens, parents and target_logits are not modified (checked after every call)": [name for name, *_ in SETUPS],
}
LIMITS = [Limit("random trees of up to 70 nodes and 22 levels", 70, lambda c: len(c.args["parents"])),
          Limit("random trees of up to 70 nodes and 22 levels", DEEPEST,  # the accepted path reaches it
                lambda c: len(accept_greedy(c.args["tokens"], c.args["parents"], c.args["target_logits"])) - 1),
          Limit("a chain of 9 accepted to the end", 8,
                lambda c: len(accept_greedy(c.args["tokens"], c.args["parents"], c.args["target_logits"])) - 1)]


def make_tree(parents, matching, seed):
    """Random logits [n, V] and tokens that match the parent's argmax exactly at `matching` nodes."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(len(parents), VOCAB, generator=g) * 3
    best = logits.argmax(-1).tolist()
    tokens = torch.randint(0, VOCAB, (len(parents),), generator=g).tolist()
    for i in range(1, len(parents)):
        if i in matching:
            tokens[i] = best[parents[i]]
        elif tokens[i] == best[parents[i]]:
            tokens[i] = (tokens[i] + 1) % VOCAB
    for i in range(1, len(parents)):  # a decoy: a node whose own row predicts its own token
        if i not in matching and best[i] != best[parents[i]]:
            tokens[i] = best[i]
            break
    return tokens, logits


def cases(ctx: Context) -> list[Case]:
    out = []
    for name, parents, matching, seed in SETUPS:
        tokens, logits = make_tree(parents, matching, seed)
        out.append(Case(name, {"tokens": tokens, "parents": parents, "target_logits": logits},
                        f"tokens={tokens}, parents={parents}"))
    return out


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    a = case.args
    return fns.accept_greedy(list(a["tokens"]), list(a["parents"]), a["target_logits"].clone())


def check(got: Any, expected: Any, case: Case) -> str | None:
    return tokens_mismatch(got, expected, "path")


def _deepest(tokens, parents, logits, row_of=lambda node, child: node, max_depth=None):
    """The rule, with a modelled mistake: the row a child is checked against, the deepest level searched."""
    depth, accepted, best = depths(parents), [True] * len(parents), 0
    for i in range(1, len(parents)):
        accepted[i] = accepted[parents[i]] and tokens[i] == int(logits[row_of(parents[i], i)].argmax())
        if accepted[i] and depth[best] < depth[i] <= (max_depth or depth[i]):
            best = i
    path = [best]
    while path[-1]:
        path.append(parents[path[-1]])
    return path[::-1]


def _walk(tokens, parents, logits, last_match):
    """A walk from the root into the first (or the last) child whose token matches."""
    kids, path = children(parents), [0]
    while True:
        matches = [c for c in kids[path[-1]] if tokens[c] == int(logits[path[-1]].argmax())]
        if not matches:
            return path
        path.append(matches[-1] if last_match else matches[0])


MISTAKES = [
    Mistake("a child c is checked against its own row target_logits[c]; it must be checked against its "
            "parent's row (row i predicts the token AFTER node i).",
            {"accept_greedy": lambda t, p, lg: _deepest(t, p, lg, lambda node, child: child)}),
    Mistake("the path holds tokens; it must hold node ids (indices into tokens), starting with 0.",
            {"accept_greedy": lambda t, p, lg: [t[i] for i in _deepest(t, p, lg)]}),
    Mistake("the root is missing: the path starts with node 0.",
            {"accept_greedy": lambda t, p, lg: _deepest(t, p, lg)[1:]}),
    Mistake("the walk stepped into the first child whose token matches and never looked at its siblings: the "
            "path ends at the DEEPEST accepted node, and a sibling carrying the same token may lead deeper.",
            {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, last_match=False)}),
    Mistake("the walk stepped into the LAST child whose token matches: the path ends at the deepest accepted "
            "node, the lowest node id among equally deep ones.",
            {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, last_match=True)}),
    Mistake("the search stopped 4 levels down: the path ends at the deepest accepted node, however deep.",
            {"accept_greedy": lambda t, p, lg: _deepest(t, p, lg, max_depth=4)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [0, 1, 1, 3, 4, 5])  # the README rule each mistake breaks
