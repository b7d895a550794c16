"""Greedy tree acceptance, compared exactly; mistakes: the child's own row, tokens instead of ids, no root,
the last (not the first) of two children with the same token."""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import tokens_mismatch
from practice.judgekit.gen import chain, depth_of, random_tree, static_tree
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("accept_greedy",)
NEEDS_MODEL = False
VOCAB = 16
WIDE = [-1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10]



def _to_deepest(parents: list[int]) -> list[int]:
    """The nodes on the path from the root to the deepest node (root excluded)."""
    depth = depth_of(parents)
    node, path = depth.index(max(depth)), []
    while node > 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


DEEP, BIG = random_tree(20, 8, depth_bias=0.7), random_tree(70, 9, depth_bias=0.3)
# (name, parents, nodes whose token is set to the target's argmax at their parent, seed)
SETUPS = [
    ("nothing accepted", WIDE, [], 0),
    ("full depth via the second child", WIDE, [2, 6, 10, 14], 1),
    ("stops mid-tree", WIDE, [1, 3, 12], 2),
    ("chain", [-1, 0, 1, 2, 3, 4], [1, 2, 3], 3),
    ("same token twice: the first child wins", WIDE, [1, 2, 6, 10], 4),  # nodes 1 and 2 carry one token
    ("single node", [-1], [], 5),
    ("deep chain of 9, all accepted", chain(9), list(range(1, 9)), 6),
    ("static [3, 3, 2] tree, last branch accepted", static_tree([3, 3, 2]), [3, 12, 30], 7),
    ("deep random tree of 20", DEEP, _to_deepest(DEEP), 8),
    ("random tree of 70", BIG, _to_deepest(BIG) + list(range(1, 70, 4)), 9),
]
RULES = {
    "a child is checked against its parent's row": ["full depth via the second child", "stops mid-tree", "chain"],
    "the path holds node ids, starting with the root 0": [name for name, *_ in SETUPS],
    "stop when no child matches": ["nothing accepted", "stops mid-tree", "single node"],
    "of two children with the same token, the first": ["same token twice: the first child wins"],
    "any depth (no fixed limit)": ["deep chain of 9, all accepted", "deep random tree of 20"],
    "a one-node tree": ["single node"],
    "tokens, parents and target_logits are not modified (checked after every call)": [name for name, *_ in SETUPS],
}


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


def _walk(tokens, parents, logits, row_of, last_match=False, max_depth=None):
    children = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    path = [0]
    while True:
        matches = [c for c in children[path[-1]] if tokens[c] == int(logits[row_of(path[-1], c)].argmax())]
        if not matches or len(path) - 1 == max_depth:
            return path
        path.append(matches[-1] if last_match else matches[0])


MISTAKES = [
    Mistake("a child c is checked against its own row target_logits[c]; it must be checked against its "
            "parent's row (row i predicts the token AFTER node i).",
            {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, lambda node, child: child)}),
    Mistake("the path holds tokens; it must hold node ids (indices into tokens), starting with 0.",
            {"accept_greedy": lambda t, p, lg: [t[i] for i in _walk(t, p, lg, lambda node, child: node)]}),
    Mistake("the root is missing: the path starts with node 0.",
            {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, lambda node, child: node)[1:]}),
    Mistake("of two children with the same (accepted) token, the LAST one was taken; take the first one "
            "(lowest node id), as the rule says.",
            {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, lambda node, child: node, last_match=True)}),
    Mistake("the walk stopped after 4 accepted nodes: keep descending while the current node has a matching "
            "child, however deep.", {"accept_greedy": lambda t, p, lg: _walk(t, p, lg, lambda node, child: node,
                                                                          max_depth=4)}),
]
