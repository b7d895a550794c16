"""Tree verification, statistical: emitted tokens must follow the target's law AND the accepted lengths the
exact law of recursive rejection (so a lossless but different algorithm, e.g. one that never tries the
siblings, fails too). The caller's tensors must come back unchanged.

Tree: root -> 3 children drawn without replacement from DRAFT0 -> one child each drawn from DRAFT1. After
the first rejection the residual norm(max(0, p - q)) has two positive entries, so every update between
siblings matters. Test: Pearson chi-square (tree_spec.chi_square) of the 64 completed 3-token
sequences and of the 3 accepted lengths against their exact laws; pass if both p >= 0.001.
"""
from itertools import permutations
from types import SimpleNamespace
from typing import Any

import torch

from practice.judgekit.compare import counts_mismatch, describe
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("verify_tree",)
NEEDS_MODEL = False
V, TRIALS, ROOT, WIDTH = 4, 4000, 0, 3
PARENTS = [-1, 0, 0, 0, 1, 2, 3]
DRAFT0 = torch.tensor([0.55, 0.2, 0.05, 0.2])
TARGET0 = torch.tensor([0.1, 0.3, 0.35, 0.25])  # residual after rejecting token 0: [0, 2/9, 6/9, 1/9]
DRAFT1 = torch.tensor([0.4, 0.1, 0.1, 0.4])
TARGET1 = torch.tensor([[0.5, 0.2, 0.2, 0.1], [0.1, 0.1, 0.4, 0.4],
                        [0.3, 0.3, 0.2, 0.2], [0.2, 0.5, 0.1, 0.2]])  # row = token of the level-1 node
TARGET2 = torch.tensor([0.25, 0.5, 0.125, 0.125])


def cases(ctx: Context) -> list[Case]:
    return [
        Case("imperfect draft", {"seed": 0, "trials": TRIALS, "perfect": False},
             f"[3, 1] tree, V = {V}, {TRIALS} trees, chi-square p >= 0.001 for sequences and accepted lengths"),
        Case("perfect draft", {"seed": 1, "trials": 300, "perfect": True},
             "draft == target: a full-depth path must be accepted"),
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


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    """-> (counts [V**3] of completed sequences, counts [3] of accepted lengths), or a str if malformed."""
    perfect = case.args["perfect"]
    trials = case.args["trials"] if perfect else ctx.trials(case.args["trials"])
    g_draft, g_fill = torch.Generator().manual_seed(case.args["seed"]), torch.Generator().manual_seed(99)
    generator = torch.Generator().manual_seed(case.args["seed"] + 1000)
    sequences, lengths = torch.zeros(V ** 3), torch.zeros(3)
    for _ in range(trials):
        tokens, draft, target = _tree(g_draft, perfect)
        draft_in, target_in = draft.clone(), target.clone()
        out = fns.verify_tree(list(tokens), list(PARENTS), draft, target, generator)
        if not (torch.equal(draft, draft_in) and torch.equal(target, target_in)):
            which = "draft_probs" if not torch.equal(draft, draft_in) else "target_probs"
            return (f"verify_tree modified the caller's {which} in place; never modify the caller's tensors "
                    f"(clone a row before changing it).")
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], list) and isinstance(out[1], int)):
            return f"verify_tree must return (path: list[int], next_token: int), got {describe(out)}."
        path, nxt = out
        if not path or path[0] != 0 or any(PARENTS[b] != a for a, b in zip(path, path[1:])):
            return (f"the path {path} is not a root path of parents={PARENTS} (tokens={tokens}): it starts at 0 "
                    f"and follows parent -> child.")
        lengths[len(path) - 1] += 1
        seq = [tokens[i] for i in path[1:]] + [nxt]
        if len(seq) < 2:
            seq.append(int(torch.multinomial(TARGET1[seq[0]], 1, generator=g_fill)))
        if len(seq) < 3:
            seq.append(int(torch.multinomial(TARGET2, 1, generator=g_fill)))
        sequences[(seq[0] * V + seq[1]) * V + seq[2]] += 1
    return sequences, lengths


def _residual(p, q):
    x = (p - q).clamp_min(0)
    return x / x.sum() if x.sum() > 0 else p


def _unnormalized_residual(p, q):
    x = (p - q).clamp_min(0)
    return x if x.sum() > 0 else p


def length_law() -> torch.Tensor:
    """Exact P(accepted length = 0, 1, 2) [3] of recursive rejection on this tree, by enumerating the draws."""
    law = torch.zeros(3, dtype=torch.float64)
    p0, q0 = TARGET0.double(), DRAFT0.double()
    for order in permutations(range(V), WIDTH):
        q, weight = q0.clone(), 1.0
        for x in order:  # probability of drawing this ordered set without replacement
            weight *= float(q[x] / q.sum())
            q[x] = 0
        p, q, reach = p0, q0.clone(), weight
        for x in order:
            accept = min(1.0, float(p[x] / q[x]))
            deeper = float(torch.minimum(DRAFT1.double(), TARGET1[x].double()).sum())  # P(grandchild accepted)
            law[1] += reach * accept * (1 - deeper)
            law[2] += reach * accept * deeper
            reach *= 1 - accept
            p = _residual(p, q)
            q[x] = 0
            q = q / q.sum()
        law[0] += reach
    return law


def expected(case: Case, ctx: Context) -> Any:
    if case.args["perfect"]:
        return torch.zeros(V ** 3), torch.tensor([0.0, 0.0, float(case.args["trials"])])
    sequences = (TARGET0[:, None, None] * TARGET1[:, :, None] * TARGET2[None, None, :]).flatten()
    return sequences, length_law().float()


def check(got: Any, expected: Any, case: Case) -> str | None:
    if isinstance(got, str):
        return got
    if not (isinstance(got, tuple) and len(got) == 2):
        return f"expected (sequence counts, length counts), got {describe(got)}."
    if case.args["perfect"]:
        lengths = got[1]
        if isinstance(lengths, torch.Tensor) and lengths.shape == (3,) and lengths[2] == expected[1][2]:
            return None
        return (f"with draft == target the first child is always accepted (min(1, 1) = 1), so the path must "
                f"reach depth 2; it stopped earlier in {int(expected[1][2] - lengths[2])} of {int(expected[1][2])} trees.")
    return (counts_mismatch(got[0], expected[0], "emitted sequences (index = 16*a + 4*b + c)")
            or counts_mismatch(got[1], expected[1], "accepted lengths (0, 1, 2 drafted tokens)"))


def _verify(tokens, parents, draft_probs, target_probs, generator, update_p=True, update_q=True,
            final_from_p=True, renormalize=True, siblings=True):
    path = [0]
    while True:
        node = path[-1]
        kids = [i for i in range(1, len(parents)) if parents[i] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node].clone()
        for child in (kids if siblings else kids[:1]):
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            if update_p:
                p = _residual(p, q) if renormalize else _unnormalized_residual(p, q)
            if update_q:
                q[x] = 0
                q = q / q.sum()
        else:
            last = p if final_from_p else target_probs[node]
            return path, int(torch.multinomial(last if update_p else _residual(p, q), 1, generator=generator))


def _mistake(**kind):
    return lambda *args: _verify(*args, **kind)


MISTAKES = [
    Mistake("every sibling is tested against the original rows: after a rejection, p must become the residual "
            "norm(max(0, p - q)) and q must drop the rejected token (renormalized) before the next child is tried.",
            {"verify_tree": _mistake(update_p=False, update_q=False)}),
    Mistake("q is not updated after a rejection: the next child was drawn without replacement, so remove the "
            "rejected token from q (q[x] = 0) and renormalize.", {"verify_tree": _mistake(update_q=False)}),
    Mistake("when every child is rejected, the token must come from the final residual p, not from "
            "target_probs[node].", {"verify_tree": _mistake(final_from_p=False)}),
    Mistake("the residual max(0, p - q) is not renormalized before the next sibling is tried: p must be a "
            "distribution again (divide by its sum), or the next acceptance test min(1, p/q) is too strict.",
            {"verify_tree": _mistake(renormalize=False)}),
    Mistake("only the first child is ever tried: the output is still lossless, but after a rejection the "
            "siblings must be tried in order (with the updated p and q) before sampling from the residual.",
            {"verify_tree": _mistake(siblings=False)}),
]
