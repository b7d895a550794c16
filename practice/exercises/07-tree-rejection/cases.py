"""Tree verification, statistical: emitted tokens must follow the target's law AND the accepted lengths the
exact law of recursive rejection (so a lossless but different algorithm, e.g. one that never tries the
siblings, fails too). The inputs must come back unchanged (judgekit.guard checks every call).

Tree: root -> 3 children drawn without replacement from DRAFT0 -> one child each drawn from DRAFT1. The
distributions are chosen so that every modelled mistake moves the law of the sequences or of the accepted
lengths by >= 0.05 in total variation (`tree_law` computes the exact law of each variant by enumeration;
tests/test_judge_rules.py checks the distances). Test: Pearson chi-square (tree_spec.chi_square) of the 64
completed 3-token sequences and of the 3 accepted lengths against their exact laws; pass if both p >= 0.001.
Also graded: a perfect draft, a root without children, a chain of 6 nodes (V = 2), and draws reproducible
from `generator` alone (judgekit.repro).

Three shaped trees (SHAPES; drafted the same way, every node's children drawn without replacement from its
draft row; `shape_law` enumerates their exact laws) check what the [3, 1] tree cannot see, with the same test:
  - "non-BFS tree", parents [-1, 0, 1, 0, 2]: the root's children are nodes 1 and 3, so code that takes a
    node's children as a contiguous run of ids tries node 2 (a grandchild) under the root, and the path check
    fails it (in ~30% of the trees: 623 of 2000 at the graded seeds);
  - "[1, 3] tree": a depth-1 node with 3 children, so the sibling rule must hold below the root too (siblings
    tried only at the root: TV 0.41 on the accepted lengths; no p/q update below the root: TV 0.13 on the
    sequences);
  - "[2, 2] tree": 2 children per node with V = 4, so after both are rejected the final p still has 2 tokens,
    and one residual too many (norm(max(0, p - q)) of the final p and q) moves the sequences by TV 0.15 (with
    3 children of V = 4 the final p is one token and that mistake is invisible); siblings tried only at the
    root move the accepted lengths by TV 0.09, no p/q update below the root the sequences by TV 0.09. Its rows
    also keep one residual too many 0.15 (TV) away from the modelled "residual not renormalized", whose
    "Likely mistake" line it would otherwise get (the verdict names a model only when its recorded counts fit).
The number of trees per shaped case (2000-3000) keeps each of these mistakes' probability of failing its case
at the p >= 0.001 bar above 0.99 (noncentral chi-square from the exact laws: 0.9945 for one residual too many
on the non-BFS tree, 1.0000 for the others), the same bar as the [3, 1] tree; they take the solution's recorded run time from ~1.6 s to ~4 s (so the
time limit, 10x that, from the 10 s floor to ~40 s).
"""
from itertools import permutations
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.gen import chain, static_tree
from practice.judgekit.repro import draw_check, draw_mismatch
from practice.judgekit.spec import Case, Context, Mistake
from tree_spec.core.topology import children, depths

FUNCTIONS = ("verify_tree",)
NEEDS_MODEL = False
V, TRIALS, ROOT, WIDTH = 4, 4000, 0, 3
PARENTS = [-1, 0, 0, 0, 1, 2, 3]
DRAFT0 = torch.tensor([0.1, 0.1, 0.75, 0.05])
TARGET0 = torch.tensor([0.05, 0.4, 0.15, 0.4])
DRAFT1 = torch.tensor([0.4, 0.1, 0.1, 0.4])
TARGET1 = torch.tensor([[0.5, 0.2, 0.2, 0.1], [0.1, 0.1, 0.4, 0.4],
                        [0.3, 0.3, 0.2, 0.2], [0.2, 0.5, 0.1, 0.2]])  # row = token of the level-1 node
TARGET2 = torch.tensor([0.25, 0.5, 0.125, 0.125])
# the chain case: V = 2, one draft and one target row per depth
CHAIN_DRAFT = torch.tensor([[0.3, 0.7], [0.6, 0.4], [0.2, 0.8], [0.5, 0.5], [0.7, 0.3]])
CHAIN_TARGET = torch.tensor([[0.5, 0.5], [0.4, 0.6], [0.45, 0.55], [0.6, 0.4], [0.5, 0.5], [0.35, 0.65]])


def _rows(*rows):
    """One [V] row per depth (the same for every token of the node) or a [V, V] block -> [depths, V, V]."""
    return torch.stack([torch.as_tensor(r).expand(V, V) for r in rows])


# shaped trees: parents, draft rows [D, V, V] and target rows [D + 1, V, V], indexed [depth, token of the node];
# the root's token is ROOT.
SHAPES = {
    "non-BFS tree": SimpleNamespace(
        parents=[-1, 0, 1, 0, 2],
        draft=_rows([0.1, 0.1, 0.4, 0.4], [0.4, 0.1, 0.1, 0.4], [0.1, 0.4, 0.4, 0.1]),
        target=_rows([0.5, 0.3, 0.1, 0.1], TARGET1,
                     [[0.2, 0.2, 0.3, 0.3], [0.4, 0.3, 0.2, 0.1], [0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]],
                     [0.1, 0.2, 0.3, 0.4])),
    "[1, 3] tree": SimpleNamespace(
        parents=static_tree([1, 3]),
        draft=_rows([0.25, 0.25, 0.25, 0.25], DRAFT0),
        target=_rows([0.4, 0.3, 0.2, 0.1],
                     [[0.05, 0.4, 0.15, 0.4], [0.4, 0.05, 0.15, 0.4], [0.4, 0.4, 0.15, 0.05], [0.15, 0.4, 0.4, 0.05]],
                     TARGET2)),
    "[2, 2] tree": SimpleNamespace(
        parents=static_tree([2, 2]),
        draft=_rows([0.2, 0.35, 0.35, 0.1], [0.55, 0.3, 0.1, 0.05]),
        target=_rows([0.45, 0.1, 0.2, 0.25], TARGET1, TARGET2)),
}
SHAPE_TRIALS = {"non-BFS tree": 2000, "[1, 3] tree": 2000, "[2, 2] tree": 3000}
# what each shaped case probes, added to its failure message
NOT_CONTIGUOUS = ("the root's children here are nodes 1 and 3, not a contiguous run of ids: find a node's children "
                  "with parents[i] == node")
SHAPE_NOTES = {
    "non-BFS tree": "a tree in no BFS order with 2 children under the root, V = 4: after both are rejected the next "
                    "token comes from the final p itself (no further residual)",
    "[1, 3] tree": "the depth-1 node has 3 children: below the root, too, the siblings are tried in order, with p "
                   "and q updated after each rejection",
    "[2, 2] tree": "2 children per node, V = 4: after every child is rejected the next token comes from the final p "
                   "itself (no further residual), and the siblings below the root are tried like the root's",
}
RULES = {
    "accept child x with probability min(1, p(x)/q(x))": ["imperfect draft", "perfect draft", "chain of 6",
                                                          "[1, 3] tree", "[2, 2] tree"],
    "on rejection p <- norm(max(0, p - q)) with the current (updated) q": ["imperfect draft", "[1, 3] tree",
                                                                            "[2, 2] tree"],
    "on rejection q loses x, renormalized": ["imperfect draft", "[1, 3] tree"],
    "the siblings are tried in order": ["imperfect draft", "[1, 3] tree", "[2, 2] tree"],
    "every child rejected: the next token from the final p": ["imperfect draft", "[2, 2] tree", "non-BFS tree"],
    "at a leaf: the next token from target_probs[leaf]": ["imperfect draft", "chain of 6", "root without children",
                                                          "non-BFS tree"],
    "the same rule at every node, not only the root": ["[1, 3] tree", "[2, 2] tree"],
    "a node's children are the i with parents[i] == node (any layout, not only BFS)": ["non-BFS tree"],
    "any depth (no fixed loop length)": ["chain of 6", "non-BFS tree"],
    "every random number from `generator`": ["reproducible draws"],
    "the caller's tensors and lists come back unchanged (checked after every call)": ["imperfect draft"],
}


def cases(ctx: Context) -> list[Case]:
    return [
        Case("imperfect draft", {"kind": "law", "seed": 0, "trials": TRIALS},
             f"[3, 1] tree, V = {V}, {TRIALS} trees, chi-square p >= 0.001 for sequences and accepted lengths"),
        Case("perfect draft", {"kind": "perfect", "seed": 1, "trials": 200},
             "draft == target: a full-depth path must be accepted"),
        Case("root without children", {"kind": "root", "seed": 2, "trials": 500},
             "parents = [-1]: the next token from target_probs[0]"),
        Case("chain of 6", {"kind": "chain", "seed": 3, "trials": 800},
             "V = 2, 800 chains of 5 drafts: 6-token sequences and accepted lengths"),
        Case("reproducible draws", {"kind": "repro", "seed": 4, "trials": 40},
             "same generator seed -> same draws, whatever the global RNGs; another seed -> other draws"),
        *(Case(name, {"kind": "shape", "seed": 5 + i, "trials": SHAPE_TRIALS[name]},
               f"parents {SHAPES[name].parents}, V = {V}, {SHAPE_TRIALS[name]} trees, chi-square p >= 0.001 for "
               f"sequences and accepted lengths") for i, name in enumerate(SHAPES)),
    ]


def _tree(g, perfect):
    """One drafted tree -> tokens [7], draft_probs [7, V], target_probs [7, V]."""
    d0 = TARGET0 if perfect else DRAFT0
    kids = torch.multinomial(d0, WIDTH, replacement=False, generator=g).tolist()
    rows1 = [TARGET1[k] if perfect else DRAFT1 for k in kids]
    grandkids = [int(torch.multinomial(r, 1, generator=g)) for r in rows1]
    tokens = [ROOT, *kids, *grandkids]
    draft = torch.stack([d0, *rows1, *[torch.zeros(V)] * WIDTH])
    target = torch.stack([TARGET0, *[TARGET1[k] for k in kids], *[TARGET2] * WIDTH])
    return tokens, draft, target


def _chain(g):
    """One drafted chain of 5 drafts -> tokens [6], draft_probs [6, 2], target_probs [6, 2]."""
    tokens = [ROOT] + [int(torch.multinomial(row, 1, generator=g)) for row in CHAIN_DRAFT]
    return tokens, torch.cat([CHAIN_DRAFT, torch.zeros(1, 2)]), CHAIN_TARGET.clone()


def _shaped(shape, g):
    """One drafted shaped tree -> tokens [n], draft_probs [n, V] (zero rows at the leaves), target_probs [n, V]:
    every node's children (in id order) are drawn without replacement from its draft row."""
    parents, depth = shape.parents, depths(shape.parents)
    tokens = [ROOT] + [0] * (len(parents) - 1)
    draft, target = torch.zeros(len(parents), V), torch.zeros(len(parents), V)
    for node, kids in enumerate(children(parents)):
        target[node] = shape.target[depth[node], tokens[node]]
        if kids:
            draft[node] = shape.draft[depth[node], tokens[node]]
            for kid, token in zip(kids, torch.multinomial(draft[node], len(kids), replacement=False, generator=g)):
                tokens[kid] = int(token)
    return tokens, draft, target


def _run(fns, parents, tokens, draft, target, generator) -> tuple[list[int], int] | str:
    out = fns.verify_tree(list(tokens), list(parents), draft, target, generator)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list) and isinstance(out[1], int)):
        return f"verify_tree must return (path: list[int], next_token: int), got {describe(out)}."
    path, nxt = out
    if not path or path[0] != 0 or any(not isinstance(b, int) or not 0 < b < len(parents) or parents[b] != a
                                       for a, b in zip(path, path[1:])):
        return (f"the path {path} is not a root path of parents={parents} (tokens={tokens}): it starts at 0 "
                f"and follows parent -> child.")
    return path, nxt


def _verified(fns, trials, seed, generator, draw, parents):
    """The learner's verify_tree on `trials` trees drafted by draw(g_draft) -> [(tokens, path, next_token)] or a str."""
    g_draft, runs = torch.Generator().manual_seed(seed), []
    for _ in range(trials):
        tokens, draft, target = draw(g_draft)
        out = _run(fns, parents, tokens, draft, target, generator)
        if isinstance(out, str):
            return out
        runs.append((tokens, *out))
    return runs


def _trees(fns, trials, seed, generator, perfect=False):
    """-> (sequence counts [V**3], length counts [3]) or a str."""
    runs = _verified(fns, trials, seed, generator, lambda g: _tree(g, perfect), PARENTS)
    if isinstance(runs, str):
        return runs
    g_fill, sequences, lengths = torch.Generator().manual_seed(99), torch.zeros(V ** 3), torch.zeros(3)
    for tokens, path, nxt in runs:
        lengths[len(path) - 1] += 1
        seq = [tokens[i] for i in path[1:]] + [nxt]
        if len(seq) < 2:
            seq.append(int(torch.multinomial(TARGET1[seq[0]], 1, generator=g_fill)))
        if len(seq) < 3:
            seq.append(int(torch.multinomial(TARGET2, 1, generator=g_fill)))
        sequences[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    return sequences, lengths


def _draws(fns, trials, seed, generator) -> list[tuple[list[int], int]] | str:
    """The (path, next_token) of `trials` drafted trees, or a str."""
    runs = _verified(fns, trials, seed, generator, lambda g: _tree(g, False), PARENTS)
    return runs if isinstance(runs, str) else [(path, nxt) for _, path, nxt in runs]


def _chains(fns, trials, seed, generator):
    """-> (sequence counts [2**6], length counts [6]) or a str."""
    runs = _verified(fns, trials, seed, generator, _chain, chain(6))
    if isinstance(runs, str):
        return runs
    g_fill, sequences, lengths = torch.Generator().manual_seed(99), torch.zeros(2 ** 6), torch.zeros(6)
    for tokens, path, nxt in runs:
        lengths[len(path) - 1] += 1
        seq = [tokens[i] for i in path[1:]] + [nxt]
        while len(seq) < 6:
            seq.append(int(torch.multinomial(CHAIN_TARGET[len(seq)], 1, generator=g_fill)))
        sequences[int("".join(map(str, seq)), 2)] += 1
    return sequences, lengths


def _shape_counts(fns, name, trials, seed, generator):
    """-> (sequence counts [V**(D+1)], length counts [D+1]) of a shaped tree, completed from the target rows."""
    shape = SHAPES[name]
    size = max(depths(shape.parents)) + 1
    runs = _verified(fns, trials, seed, generator, lambda g: _shaped(shape, g), shape.parents)
    if isinstance(runs, str):
        return f"{runs} ({NOT_CONTIGUOUS}.)" if name == "non-BFS tree" and "not a root path" in runs else runs
    g_fill, sequences, lengths = torch.Generator().manual_seed(99), torch.zeros(V ** size), torch.zeros(size)
    for tokens, path, nxt in runs:
        lengths[len(path) - 1] += 1
        seq = [tokens[i] for i in path[1:]] + [nxt]
        while len(seq) < size:
            seq.append(int(torch.multinomial(shape.target[len(seq), seq[-1]], 1, generator=g_fill)))
        sequences[sum(t * V ** (size - 1 - i) for i, t in enumerate(seq))] += 1
    return sequences, lengths


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> (sequence counts, length counts), next-token counts (root), the reproducibility dict, or a str."""
    kind, seed, trials = case.args["kind"], case.args["seed"], case.args["trials"]
    generator = torch.Generator().manual_seed(seed + 1000)
    if kind == "law":
        return _trees(fns, ctx.trials(trials), seed, generator)
    if kind == "perfect":
        return _trees(fns, trials, seed, generator, perfect=True)
    if kind == "chain":
        return _chains(fns, trials, seed, generator)
    if kind == "repro":
        return draw_check(lambda g: _draws(fns, trials, seed, g), seed + 1000)
    if kind == "shape":
        return _shape_counts(fns, case.name, ctx.trials(trials), seed, generator)
    counts = torch.zeros(V)
    for _ in range(trials):
        out = _run(fns, [-1], [ROOT], torch.zeros(1, V), TARGET0[None].clone(), generator)
        if isinstance(out, str):
            return out
        counts[out[1]] += 1
    return counts


def _residual(p, q, normalize=True):
    x = (p - q).clamp_min(0)
    if x.sum() <= 0:
        return p
    return x / x.sum() if normalize else x


def tree_law(update_p=True, update_q=True, final_from_p=True, renormalize=True, siblings=True,
             original_q=False) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact laws (sequences [V**3], accepted lengths [3]) of a variant of recursive rejection on this tree,
    by enumerating the ordered children; the flags are those of `_verify` (all defaults: the right rule)."""
    d0, t0, d1, t1, t2 = (x.double() for x in (DRAFT0, TARGET0, DRAFT1, TARGET1, TARGET2))
    seq, lengths = torch.zeros(V, V, V, dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    for order in permutations(range(V), WIDTH):
        q, reach = d0.clone(), 1.0
        for x in order:  # probability of drawing this ordered set without replacement
            reach *= float(q[x] / q.sum())
            q[x] = 0
        p, q = t0.clone(), d0.clone()
        for x in (order if siblings else order[:1]):
            accept = min(1.0, float(p[x] / q[x]))
            for y in range(V):  # the accepted child's own child y, drawn from DRAFT1
                w = reach * accept * float(d1[y])
                a = min(1.0, float(t1[x, y] / d1[y]))
                seq[x, y] += w * a * t2
                lengths[2] += w * a
                seq[x] += w * (1 - a) * torch.outer(_residual(t1[x], d1) if final_from_p else t1[x], t2)
                lengths[1] += w * (1 - a)
            reach *= 1 - accept
            if update_p:
                p = _residual(p, d0 if original_q else q, renormalize)
            if update_q:
                q[x] = 0
                q = q / q.sum()
        last = (p if final_from_p else t0) if update_p else _residual(p, q)
        seq += reach * torch.einsum("a,ab,c->abc", last / last.sum(), t1, t2)
        lengths[0] += reach
    return seq.flatten(), lengths


def shape_law(name: str, depth_flags=lambda depth: {}) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact laws (sequences [V**(D+1)], accepted lengths [D+1]) of recursive rejection on SHAPES[name], by
    enumerating each node's ordered children and recursing into them (a child's subtree is drafted
    independently given its token). depth_flags(depth) -> the flags of `_verify` that hold at that depth
    (defaults: the right rule; e.g. {"siblings": False} below the root models sibling handling at the root only)."""
    shape = SHAPES[name]
    parents, depth = shape.parents, depths(shape.parents)
    draft, target, deepest = shape.draft.double(), shape.target.double(), max(depth)
    kids = children(parents)

    def markov(d, token):  # the target's law of the tokens after a node at depth d -> [V] * (deepest - d + 1)
        row = target[d, token]
        return row if d == deepest else torch.stack([row[a] * markov(d + 1, a) for a in range(V)])

    def node_law(node, token):  # -> (law of the emitted tokens after `node`, law of the accepted lengths below it)
        d = depth[node]
        seq, lengths = torch.zeros([V] * (deepest - d + 1), dtype=torch.float64), torch.zeros(deepest - d + 1,
                                                                                               dtype=torch.float64)
        if not kids[node]:
            lengths[0] = 1
            return markov(d, token), lengths
        flags = {"update_p": True, "update_q": True, "final_from_p": True, "renormalize": True, "siblings": True,
                 "original_q": False, "final_residual": False, **depth_flags(d)}
        p0, q0 = target[d, token], draft[d, token]
        for order in permutations(range(V), len(kids[node])):
            q, reach = q0.clone(), 1.0
            for x in order:  # probability of drawing this ordered set without replacement
                reach *= float(q[x] / q.sum())
                q[x] = 0
            p, q = p0.clone(), q0.clone()
            tried = list(zip(kids[node], order))
            for kid, x in (tried if flags["siblings"] else tried[:1]):
                accept = min(1.0, float(p[x] / q[x]))
                kid_seq, kid_lengths = node_law(kid, x)
                seq[x] += reach * accept * kid_seq
                lengths[1:1 + len(kid_lengths)] += reach * accept * kid_lengths
                reach *= 1 - accept
                if flags["update_p"]:
                    p = _residual(p, q0 if flags["original_q"] else q, flags["renormalize"])
                if flags["update_q"]:
                    q[x] = 0
                    q = q / q.sum()
            last = (p if flags["final_from_p"] else p0) if flags["update_p"] else _residual(p, q)
            last = _residual(last, q) if flags["final_residual"] else last
            seq += reach * torch.stack([last[a] / last.sum() * markov(d + 1, a) for a in range(V)])
            lengths[0] += reach
        return seq, lengths

    seq, lengths = node_law(0, ROOT)
    return seq.flatten(), lengths


def chain_length_law() -> torch.Tensor:
    """Exact P(accepted length = 0..5) [6] on the chain: depth i is reached with prob prod_j sum_x min(d_j, t_j)."""
    accept = torch.minimum(CHAIN_DRAFT.double(), CHAIN_TARGET[:5].double()).sum(-1).tolist() + [0.0]
    law, reach = [], 1.0
    for a in accept:
        law.append(reach * (1 - a))
        reach *= a
    return torch.tensor(law)


def expected(case: Case, ctx: Context) -> Any:
    kind, trials = case.args["kind"], case.args["trials"]
    if kind == "perfect":
        return torch.zeros(V ** 3), torch.tensor([0.0, 0.0, float(trials)])
    if kind == "root":
        return TARGET0 * trials
    if kind == "repro":
        return {"same seed, global RNGs reseeded: same draws": True, "another seed: other draws": True}
    if kind == "chain":
        law = torch.ones(1, dtype=torch.float64)
        for row in CHAIN_TARGET.double():
            law = torch.outer(law, row).flatten()
        return law.float(), chain_length_law().float()
    if kind == "shape":
        sequences, lengths = shape_law(case.name)
        shape = SHAPES[case.name]
        lossless = shape.target[0, ROOT].double()
        for d in range(1, len(lengths)):  # the target's own law of the completed sequences (it is Markov)
            lossless = (lossless.reshape(-1, V)[:, :, None] * shape.target[d].double()).flatten()
        if not torch.allclose(sequences, lossless, atol=1e-9):
            raise RuntimeError(f"shape_law({case.name!r}) is not the target's law: the enumeration is wrong")
        return sequences.float(), lengths.float()
    sequences, lengths = tree_law()
    return sequences.float(), lengths.float()


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    kind = case.args["kind"]
    if kind == "repro":
        return draw_mismatch(got, expected, "verify_tree")
    if kind == "root":
        return counts_mismatch(got, expected, "next tokens of a root without children (they must follow "
                                              "target_probs[0])")
    if not (isinstance(got, tuple) and len(got) == 2):
        return f"expected (sequence counts, length counts), got {describe(got)}."
    if kind == "perfect":
        lengths = got[1]
        if isinstance(lengths, torch.Tensor) and lengths.shape == (3,) and lengths[2] == expected[1][2]:
            return None
        return (f"with draft == target the first child is always accepted (min(1, 1) = 1), so the path must "
                f"reach depth 2; it stopped earlier in {int(expected[1][2] - lengths[2])} of {int(expected[1][2])} trees.")
    if kind == "chain":
        return (counts_mismatch(got[0], expected[0], "emitted 6-token sequences of the chain (binary index)")
                or counts_mismatch(got[1], expected[1], "accepted lengths of the chain (0 to 5 drafted tokens)"))
    if kind == "shape":
        size = len(expected[1])
        index = " + ".join(f"{V ** (size - 1 - i)}*{'abcd'[i]}" for i in range(size - 1)) + f" + {'abcd'[size - 1]}"
        problem = (counts_mismatch(got[0], expected[0], f"emitted {size}-token sequences of the {case.name} "
                                                        f"(index = {index})")
                   or counts_mismatch(got[1], expected[1], f"accepted lengths of the {case.name} (0 to {size - 1} "
                                                           f"drafted tokens)"))
        return f"{problem} ({SHAPE_NOTES[case.name]}.)" if problem else None
    return (counts_mismatch(got[0], expected[0], "emitted sequences (index = 16*a + 4*b + c)")
            or counts_mismatch(got[1], expected[1], "accepted lengths (0, 1, 2 drafted tokens)"))


def _verify(tokens, parents, draft_probs, target_probs, generator, update_p=True, update_q=True,
            final_from_p=True, renormalize=True, siblings=True, original_q=False):
    path, kids_of = [0], children(parents)
    while True:
        node = path[-1]
        kids = kids_of[node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node].clone()
        for child in (kids if siblings else kids[:1]):
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            if update_p:
                p = _residual(p, draft_probs[node] if original_q else q, renormalize)
            if update_q:
                q[x] = 0
                q = q / q.sum()
        else:
            last = p if final_from_p else target_probs[node]
            return path, int(torch.multinomial(last if update_p else _residual(p, q), 1, generator=generator))


# mistake name -> the flags of `_verify` (and `tree_law`) that model it
VARIANTS = {
    "no sibling residual": {"update_p": False, "update_q": False},
    "q not updated": {"update_q": False},
    "final token from the target": {"final_from_p": False},
    "residual not renormalized": {"renormalize": False},
    "first child only": {"siblings": False},
    "residual against the original q": {"original_q": True},
}
MESSAGES = {
    "no sibling residual": "every sibling is tested against the original rows: after a rejection, p must become "
                           "the residual norm(max(0, p - q)) and q must drop the rejected token (renormalized) "
                           "before the next child is tried.",
    "q not updated": "q is not updated after a rejection: the next child was drawn without replacement, so remove "
                     "the rejected token from q (q[x] = 0) and renormalize.",
    "final token from the target": "when every child is rejected, the token must come from the final residual p, "
                                   "not from target_probs[node].",
    "residual not renormalized": "the residual max(0, p - q) is not renormalized before the next sibling is tried: "
                                 "p must be a distribution again (divide by its sum), or the next acceptance test "
                                 "min(1, p/q) is too strict.",
    "first child only": "only the first child is ever tried: the output is still lossless, but after a rejection "
                        "the siblings must be tried in order (with the updated p and q) before sampling from the "
                        "residual.",
    "residual against the original q": "the residual after a rejection was taken against the ORIGINAL "
                                       "draft_probs[node]; take it against the current q (with the earlier "
                                       "rejected tokens removed): p <- norm(max(0, p - q)), then update q.",
}
MISTAKES = [Mistake(MESSAGES[name], {"verify_tree": lambda *args, flags=flags: _verify(*args, **flags)})
            for name, flags in VARIANTS.items()]
