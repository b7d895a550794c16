"""Tree verification, statistical: emitted tokens must follow the target's law AND the accepted lengths the
exact law of recursive rejection (so a lossless but different algorithm, e.g. one that never tries the
siblings, fails too). The inputs must come back unchanged (judgekit.guard checks every call).

Tree: root -> 3 children drawn without replacement from DRAFT0 -> one child each drawn from DRAFT1. The
distributions are chosen so that every modelled mistake moves the law of the sequences or of the accepted
lengths by >= 0.05 in total variation (`tree_law` computes the exact law of each variant by enumeration,
judgekit.rejection.shape_law; tests/test_judge_rules.py checks the distances). Test: Pearson chi-square
(tree_spec.chi_square) of the 64 completed 3-token sequences and of the 3 accepted lengths against their exact
laws; pass if both p >= 0.001. Also graded: a perfect draft, a root without children, a chain of 6 nodes (V = 2),
and draws reproducible from `generator` alone (judgekit.repro).

Three shaped trees (SHAPES; every node's children drawn without replacement from its draft row) check what the
[3, 1] tree cannot see, with the same test: "non-BFS tree" [-1, 0, 1, 0, 2] (the root's children are nodes 1 and 3:
children taken as a contiguous run of ids fail the path check or the accepted lengths); "[1, 3] tree" (the sibling
rule below the root: siblings only at the root TV 0.41 on the lengths, no p/q update below it TV 0.13 on the
sequences); "[2, 2] tree" (V = 4: after both children are rejected the final p keeps 2 tokens, so one residual too
many moves the sequences by TV 0.15, 0.15 away from "residual not renormalized" too). 2000-3000 trees per shaped
case keep each of these mistakes' probability of failing at the p >= 0.001 bar above 0.99 (noncentral chi-square
from the exact laws), the bar of the [3, 1] tree.

A failing law case brings a re-runnable input (`_repro`, run in the worker only when the case fails): the drafted
tree where the learner's outcomes strayed farthest from the rule's exact law, a generator seed, and over REPRO_RUNS calls the learner's (path, next token) counts beside
the rule's exact expected counts (judgekit.rejection.outcome_law), with the largest gaps, and the rule broken:
the sequences (the target's law: residuals and the final p) or only the accepted lengths (which children are
tried, and in which order).
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.gen import chain, static_tree
from practice.judgekit.rejection import outcome_counts, outcome_law, shape_law, verify
from practice.judgekit.repro import draw_check, draw_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules
from practice.judgekit.values import TYPE_POLICY, as_int, as_ints
from tree_spec.analysis.stats import chi_square
from tree_spec.core.topology import children, depths

FUNCTIONS = ("verify_tree",)
NEEDS_MODEL = False
V, TRIALS, ROOT, WIDTH, REPRO_RUNS = 4, 4000, 0, 3, 1000
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


def _rows(*rows, v=V):  # one [v] row per depth (the same for every token of the node) or a [v, v] block
    return torch.stack([torch.as_tensor(r).expand(v, v) for r in rows])


# parents, draft rows [D, V, V] and target rows [D + 1, V, V], indexed [depth, token of the node]; root token ROOT
TREE = SimpleNamespace(parents=PARENTS, draft=_rows(DRAFT0, DRAFT1), target=_rows(TARGET0, TARGET1, TARGET2))
CHAIN = SimpleNamespace(parents=chain(6), draft=_rows(*CHAIN_DRAFT, v=2), target=_rows(*CHAIN_TARGET, v=2))
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
CHILDREN_RULE = "a node's children are the i with parents[i] == node (any layout, not only BFS)"
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
    CHILDREN_RULE: ["non-BFS tree"],
    "any depth (no fixed loop length)": ["chain of 6", "non-BFS tree"],
    "every random number from `generator`": ["reproducible draws"],
    "the caller's tensors and lists come back unchanged (checked after every call)": ["imperfect draft"],
}
LIMITS = [Limit("4000 freshly drafted trees", 4000, lambda c: c.args["trials"] if c.args["kind"] == "law" else 0),
          Limit("a chain of 5 drafts", 5, lambda c: 5 if c.args["kind"] == "chain" else 0),
          Limit("a `[1, 3]` tree (a depth-1 node with 3 children", 3,
                lambda c: max(map(len, children(SHAPES[c.name].parents))) if c.name == "[1, 3] tree" else 0)]


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
    """One drafted [3, 1] tree -> tokens [7], draft_probs [7, V], target_probs [7, V]."""
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


def _case_shape(case: Case) -> tuple[SimpleNamespace, Any]:
    """(shape, draw(g) -> tokens, draft_probs, target_probs) of a law, chain or shape case."""
    kind = case.args["kind"]
    if kind in ("law", "perfect"):
        return TREE, lambda g: _tree(g, kind == "perfect")
    if kind == "chain":
        return CHAIN, _chain
    return SHAPES[case.name], lambda g: _shaped(SHAPES[case.name], g)


def _run(fns, parents, tokens, draft, target, generator) -> tuple[list[int], int] | str:
    out = fns.verify_tree(list(tokens), list(parents), draft, target, generator)
    path = as_ints(out[0]) if isinstance(out, tuple) and len(out) == 2 else None
    nxt = as_int(out[1]) if path is not None else None
    if path is None or nxt is None:
        return f"verify_tree must return (path: list[int], next_token: int), got {describe(out)}; {TYPE_POLICY}."
    if not path or path[0] != 0 or any(not 0 < b < len(parents) or parents[b] != a for a, b in zip(path, path[1:])):
        bad = next(((a, b) for a, b in zip(path, path[1:]) if 0 < b < len(parents) and parents[b] != a), None)
        note = f" Node {bad[1]} is not a child of node {bad[0]}. Rule: {CHILDREN_RULE}." if bad else ""
        return (f"the path {path} is not a root path of parents={parents} (tokens={tokens}): it starts at 0 "
                f"and follows parent -> child.{note}")
    return path, nxt


def _verified(fns, trials, seed, generator, draw, parents):
    """The learner's verify_tree on `trials` trees drafted by draw(g_draft) -> [(tokens, draft_probs, target_probs,
    path, next_token)] or a str."""
    g_draft, runs = torch.Generator().manual_seed(seed), []
    for _ in range(trials):
        tokens, draft, target = draw(g_draft)
        out = _run(fns, parents, tokens, draft, target, generator)
        if isinstance(out, str):
            return out
        runs.append((tokens, draft, target, *out))
    return runs


def _counts(case, runs) -> tuple[torch.Tensor, torch.Tensor]:
    """(sequence counts [V**(D+1)], length counts [D+1]) of the runs, the emitted tokens completed from the target
    rows."""
    shape, _ = _case_shape(case)
    v, size = shape.target.shape[-1], max(depths(shape.parents)) + 1
    g_fill, sequences, lengths = torch.Generator().manual_seed(99), torch.zeros(v ** size), torch.zeros(size)
    for tokens, _, _, path, nxt in runs:
        lengths[len(path) - 1] += 1
        seq = [tokens[i] for i in path[1:]] + [nxt]
        while len(seq) < size:
            seq.append(int(torch.multinomial(shape.target[len(seq), seq[-1]], 1, generator=g_fill)))
        sequences[sum(t * v ** (size - 1 - i) for i, t in enumerate(seq))] += 1
    return sequences, lengths


def _farthest(case, runs) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    """The drafted tree (tokens, draft_probs, target_probs) whose outcomes in `runs` stray farthest from the rule's
    exact law (the smallest chi-square p among trees drafted at least 20 times): where the mistake shows."""
    parents, groups = _case_shape(case)[0].parents, {}
    for tokens, draft, target, path, nxt in runs:
        groups.setdefault(tuple(tokens), (draft, target, []))[2].append((tuple(path), nxt))
    best, best_p = None, 2.0
    for tokens, (draft, target, outcomes) in groups.items():
        if len(outcomes) < 20:
            continue
        law, seen = outcome_law(tokens, parents, draft, target), {}
        for outcome in outcomes:
            seen[outcome] = seen.get(outcome, 0) + 1
        cells = sorted(set(law) | set(seen))
        _, p = chi_square(torch.tensor([float(seen.get(c, 0)) for c in cells]),
                          torch.tensor([law.get(c, 0.0) + 1e-9 for c in cells], dtype=torch.float64))
        if p < best_p:
            best, best_p = (list(tokens), draft, target), p
    return best or runs[0][:3]


def _repro(fns, case, runs) -> dict[str, Any] | str:
    """The drafted tree where the learner's outcomes stray farthest (`_farthest`), run REPRO_RUNS times with a
    generator seeded seed + 2000: the learner's (path, next token) counts."""
    shape, _ = _case_shape(case)
    tokens, draft, target = _farthest(case, runs)
    generator, outcomes = torch.Generator().manual_seed(case.args["seed"] + 2000), []
    for _ in range(REPRO_RUNS):
        out = _run(fns, shape.parents, tokens, draft, target, generator)
        if isinstance(out, str):
            return out
        outcomes.append(out)
    return {"tokens": tokens, "draft": draft, "target": target, "seed": case.args["seed"] + 2000,
            "observed": outcome_counts(outcomes)}


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> (sequence counts, length counts, re-runnable input or None), next-token counts (root), the
    reproducibility dict, or a str."""
    kind, seed, trials = case.args["kind"], case.args["seed"], case.args["trials"]
    generator = torch.Generator().manual_seed(seed + 1000)
    if kind == "repro":
        return draw_check(lambda g: _draws(fns, trials, seed, g), seed + 1000)
    if kind == "root":
        counts = torch.zeros(V)
        for _ in range(trials):
            out = _run(fns, [-1], [ROOT], torch.zeros(1, V), TARGET0[None].clone(), generator)
            if isinstance(out, str):
                return out
            counts[out[1]] += 1
        return counts
    shape, draw = _case_shape(case)
    runs = _verified(fns, ctx.trials(trials) if kind in ("law", "shape") else trials, seed, generator, draw,
                     shape.parents)
    if isinstance(runs, str):
        return runs
    got = _counts(case, runs)
    if kind == "perfect" or check(got, expected(case, ctx), case) is None:
        return got
    return (*got, _repro(fns, case, runs))  # the case fails: a re-runnable input for the message


def _draws(fns, trials, seed, generator) -> list[tuple[list[int], int]] | str:
    """The (path, next_token) of `trials` drafted trees, or a str."""
    runs = _verified(fns, trials, seed, generator, lambda g: _tree(g, False), PARENTS)
    return runs if isinstance(runs, str) else [(path, nxt) for *_, path, nxt in runs]


def tree_law(**flags: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact laws (sequences [V**3], accepted lengths [3]) of a variant of recursive rejection on the [3, 1] tree;
    flags as judgekit.rejection (all defaults: the right rule), at every node."""
    return shape_law(TREE.parents, TREE.draft, TREE.target, ROOT, lambda depth: flags)


def expected(case: Case, ctx: Context) -> Any:
    kind, trials = case.args["kind"], case.args["trials"]
    if kind == "perfect":
        return torch.zeros(V ** 3), torch.tensor([0.0, 0.0, float(trials)])
    if kind == "root":
        return TARGET0 * trials
    if kind == "repro":
        return {"same seed, global RNGs reseeded: same draws": True, "another seed: other draws": True}
    shape, _ = _case_shape(case)
    sequences, lengths = shape_law(shape.parents, shape.draft, shape.target, ROOT)
    lossless, v = shape.target[0, ROOT].double(), shape.target.shape[-1]
    for d in range(1, len(lengths)):  # the target's own law of the completed sequences (it is Markov)
        lossless = (lossless.reshape(-1, v)[:, :, None] * shape.target[d].double()).flatten()
    if not torch.allclose(sequences, lossless, atol=1e-9):
        raise RuntimeError(f"shape_law for {case.name!r} is not the target's law: the enumeration is wrong")
    return sequences.float(), lengths.float()


def _rule(case: Case, sequences_fail: bool) -> str:
    """The rule a failing law case shows broken: the target's law (sequences) or which children are tried (lengths)."""
    if sequences_fail:
        return ("Rule: the emitted tokens follow the target's law: on rejection p <- norm(max(0, p - q)) with the "
                "current (updated) q, and when every child is rejected the next token comes from the final p itself.")
    where = {"chain of 6": ", at every depth (any depth: no fixed loop length)",
             "non-BFS tree": f"; {CHILDREN_RULE}", "[1, 3] tree": ", at every node, not only the root",
             "[2, 2] tree": ", at every node, not only the root"}.get(case.name, "")
    return (f"Rule: the siblings are tried in order, child x accepted with probability min(1, p(x)/q(x)) under the "
            f"updated p and q{where} (the accepted lengths follow recursive rejection's law).")


def _rerun(case: Case, repro: Any) -> str:
    """The re-runnable input of a failing case and the learner's counts on it beside the rule's."""
    if not isinstance(repro, dict):
        return f" Re-running one of its trees failed: {repro}" if isinstance(repro, str) else ""
    parents = _case_shape(case)[0].parents
    law = outcome_law(repro["tokens"], parents, repro["draft"], repro["target"])
    seen = {(tuple(path), token): n for path, token, n in repro["observed"]}
    cells = sorted(set(law) | set(seen))
    exp = [REPRO_RUNS * law.get(c, 0.0) for c in cells]
    obs = [seen.get(c, 0) for c in cells]
    _, p = chi_square(torch.tensor(obs, dtype=torch.float64), torch.tensor(exp, dtype=torch.float64) + 1e-9)
    gaps = sorted(range(len(cells)), key=lambda i: -abs(obs[i] - exp[i]))[:3]
    rows = lambda t: [[round(v, 4) for v in row] for row in t.tolist()]  # noqa: E731
    shown = "; ".join(f"path {list(cells[i][0])} then token {cells[i][1]}: expected {exp[i]:.1f}, yours {obs[i]}"
                      for i in gaps)
    paths = {path: sum(v for (q, _), v in law.items() if q == path) for path, _ in law}
    never = [list(path) for path, prob in paths.items() if prob * REPRO_RUNS >= 50
             and not any(c[0] == path for c in seen)]
    missing = (f" The rule accepts {', '.join(map(str, never))} often; your code never did." if never else "")
    if never and case.name == "non-BFS tree" and any(3 in path for path in never):
        missing += (" Node 3 is a child of the root (parents[3] == 0) whose id does not follow node 1's: the rule "
                    "tries it after node 1 is rejected.")
    return (f"\n      Re-run the tree where your counts stray farthest: tokens = {repro['tokens']}, parents = {parents}, draft_probs = "
            f"torch.tensor({rows(repro['draft'])}), target_probs = torch.tensor({rows(repro['target'])}), "
            f"generator = torch.Generator().manual_seed({repro['seed']}); over {REPRO_RUNS} calls (chi-square p = "
            f"{p:.2g}), the largest gaps: {shown}.{missing}")


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    kind = case.args["kind"]
    if kind == "repro":
        return draw_mismatch(got, expected, "verify_tree")
    if kind == "root":
        return counts_mismatch(got, expected, "next tokens of a root without children (they must follow "
                                              "target_probs[0])")
    if not (isinstance(got, tuple) and len(got) in (2, 3)):
        return f"expected (sequence counts, length counts), got {describe(got)}."
    if kind == "perfect":
        lengths = got[1]
        if isinstance(lengths, torch.Tensor) and lengths.shape == (3,) and lengths[2] == expected[1][2]:
            return None
        return (f"with draft == target the first child is always accepted (min(1, 1) = 1), so the path must "
                f"reach depth 2; it stopped earlier in {int(expected[1][2] - lengths[2])} of {int(expected[1][2])} "
                f"trees. Rule: accept child x with probability min(1, p(x)/q(x)).")
    size, v = len(expected[1]), _case_shape(case)[0].target.shape[-1]
    what = {"law": "", "chain": "of the chain ", "shape": f"of the {case.name} "}[kind]
    index = " + ".join(f"{v ** (size - 1 - i)}*{'abcdef'[i]}" for i in range(size - 1)) + f" + {'abcdef'[size - 1]}"
    sequences = counts_mismatch(got[0], expected[0], f"emitted {size}-token sequences {what}(index = {index})")
    problem = sequences or counts_mismatch(got[1], expected[1], f"accepted lengths {what}(0 to {size - 1} drafted "
                                                                f"tokens)")
    if problem is None:
        return None
    return f"{problem} {_rule(case, sequences is not None)}{_rerun(case, got[2] if len(got) == 3 else None)}"


# mistake name -> the flags of judgekit.rejection.verify (and `tree_law`) that model it
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
MISTAKES = [Mistake(MESSAGES[name], {"verify_tree": lambda *args, flags=flags: verify(*args, **flags)})
            for name, flags in VARIANTS.items()]
MISTAKES = with_rules(MISTAKES, RULES, [1, 2, 4, 1, 3, 1])  # the README rule each mistake breaks
