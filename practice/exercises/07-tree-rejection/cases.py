"""Tree verification, statistical: the completed 3-token sequence must follow the target's law.

Tree: root -> 2 children drawn without replacement from DRAFT0 -> one child each drawn from DRAFT1.
Test: Pearson chi-square (tree_spec.speedup.chi_square) of 5000 seeded trees against the exact law,
pass if p >= 0.001. Mistakes modelled: no update between siblings, q not updated, final sample
from the target row.
"""
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("verify_tree",)
NEEDS_MODEL = False
V, TRIALS, ROOT = 3, 5000, 0
PARENTS = [-1, 0, 0, 1, 2]
DRAFT0, DRAFT1 = torch.tensor([0.5, 0.35, 0.15]), torch.tensor([0.2, 0.2, 0.6])
TARGET0 = torch.tensor([0.1, 0.3, 0.6])
TARGET1 = torch.tensor([[0.6, 0.3, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]])  # row = token of the level-1 node
TARGET2 = torch.tensor([0.25, 0.5, 0.25])


def cases(ctx: Context) -> list[Case]:
    return [
        Case("imperfect draft", {"seed": 0, "trials": TRIALS, "perfect": False},
             f"[2, 1] tree, V = {V}, {TRIALS} trees, chi-square p >= 0.001"),
        Case("perfect draft", {"seed": 1, "trials": 300, "perfect": True},
             "draft == target: a full-depth path must be accepted"),
    ]


def _tree(g, perfect):
    """One drafted tree -> tokens [5], draft_probs [5, V], target_probs [5, V]."""
    d0 = TARGET0 if perfect else DRAFT0
    kids = torch.multinomial(d0, 2, replacement=False, generator=g).tolist()
    rows1 = [TARGET1[k] if perfect else DRAFT1 for k in kids]
    grandkids = [int(torch.multinomial(r, 1, generator=g)) for r in rows1]
    tokens = [ROOT, *kids, *grandkids]
    draft = torch.stack([d0, *rows1, torch.zeros(V), torch.zeros(V)])
    target = torch.stack([TARGET0, TARGET1[kids[0]], TARGET1[kids[1]], TARGET2, TARGET2])
    return tokens, draft, target


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> counts [V**3] of completed sequences, or of path lengths [3] (perfect); str if malformed."""
    perfect = case.args["perfect"]
    trials = case.args["trials"] if perfect else ctx.trials(case.args["trials"])
    g_draft, g_fill = torch.Generator().manual_seed(case.args["seed"]), torch.Generator().manual_seed(99)
    generator = torch.Generator().manual_seed(case.args["seed"] + 1000)
    counts = torch.zeros(3 if perfect else V ** 3)
    for _ in range(trials):
        tokens, draft, target = _tree(g_draft, perfect)
        out = fns.verify_tree(list(tokens), list(PARENTS), draft, target, generator)
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list) and isinstance(out[1], int)):
            return f"verify_tree must return (path: list[int], next_token: int), got {describe(out)}."
        path, nxt = out
        if not path or path[0] != 0 or any(PARENTS[b] != a for a, b in zip(path, path[1:])):
            return (f"the path {path} is not a root path of parents={PARENTS} (tokens={tokens}): it starts at 0 "
                    f"and follows parent -> child.")
        if perfect:
            counts[len(path) - 1] += 1
            continue
        seq = [tokens[i] for i in path[1:]] + [nxt]
        if len(seq) < 2:
            seq.append(int(torch.multinomial(TARGET1[seq[0]], 1, generator=g_fill)))
        if len(seq) < 3:
            seq.append(int(torch.multinomial(TARGET2, 1, generator=g_fill)))
        counts[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    return counts


def expected(case: Case, ctx: Context) -> torch.Tensor:
    if case.args["perfect"]:
        return torch.tensor([0.0, 0.0, float(case.args["trials"])])
    return (TARGET0[:, None, None] * TARGET1[:, :, None] * TARGET2[None, None, :]).flatten()


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    if case.args["perfect"]:
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and got[2] == expected[2]:
            return None
        return (f"with draft == target the first child is always accepted (min(1, 1) = 1), so the path must "
                f"reach depth 2; it stopped earlier in {int(expected[2] - got[2])} of {int(expected[2])} trees.")
    return counts_mismatch(got, expected, "emitted sequences (index = 9*a + 3*b + c)")


def _residual(p, q):
    x = (p - q).clamp_min(0)
    return x / x.sum() if x.sum() > 0 else p


def _verify(tokens, parents, draft_probs, target_probs, generator, update_p=True, update_q=True, final_from_p=True):
    path = [0]
    while True:
        node = path[-1]
        kids = [i for i in range(1, len(parents)) if parents[i] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node].clone()
        for child in kids:
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            p = _residual(p, q) if update_p else p
            if update_q:
                q[x] = 0
                q = q / q.sum()
        else:
            last = p if final_from_p else target_probs[node]
            return path, int(torch.multinomial(last if update_p else _residual(p, q), 1, generator=generator))


MISTAKES = [
    Mistake("every sibling is tested against the original rows: after a rejection, p must become the residual "
            "norm(max(0, p - q)) and q must drop the rejected token (renormalized) before the next child is tried.",
            {"verify_tree": lambda *a: _verify(*a, update_p=False, update_q=False)}),
    Mistake("q is not updated after a rejection: the next child was drawn without replacement, so remove the "
            "rejected token from q (q[x] = 0) and renormalize.", {"verify_tree": lambda *a: _verify(*a, update_q=False)}),
    Mistake("when every child is rejected, the token must come from the final residual p, not from "
            "target_probs[node].", {"verify_tree": lambda *a: _verify(*a, final_from_p=False)}),
]
