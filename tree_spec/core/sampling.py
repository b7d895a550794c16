"""Lossless speculative sampling: the rejection rule for a chain of drafts and for a token tree.

Names: `target_probs` is the distribution we must reproduce (the verifier's), `draft_probs` the
proposer's. Every random draw goes through the `generator` argument.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .topology import validate_parents


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """norm(max(0, target - draft)) over the last dim: [..., V], [..., V] -> [..., V].

    This is the distribution to sample from after a draft token is rejected: it holds exactly the
    target mass the draft under-covers. Degenerate case: where target <= draft everywhere (only
    possible when target == draft), a rejection has probability 0, so any distribution is correct;
    we return `target_probs` there.
    """
    excess = (target_probs - draft_probs).clamp_min(0)
    mass = excess.sum(-1, keepdim=True)
    return torch.where(mass > 0, excess / mass.clamp_min(torch.finfo(excess.dtype).tiny), target_probs)


def paired_distributions(
    vocab_size: int, alpha: float, batch_shape: tuple[int, ...] = (), generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random (target_probs, draft_probs), each [*batch_shape, V], with acceptance rate exactly alpha.

    target = alpha * s + (1 - alpha) * a and draft = alpha * s + (1 - alpha) * b, with s, a, b random
    (Dirichlet(1)) and a, b on a random split of the vocabulary into two non-empty parts. Then
    sum min(target, draft) = alpha and residual(target, draft) = a, which differs from the target, so
    a verifier that skips the residual is visibly biased. Needs vocab_size >= 2 and 0 < alpha <= 1.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")

    device = generator.device if generator is not None else None  # drawn where the generator lives

    def dirichlet(mask: torch.Tensor) -> torch.Tensor:
        e = -torch.rand(*batch_shape, vocab_size, generator=generator, device=device).neg().log1p() * mask  # Exp(1)
        return e / e.sum(-1, keepdim=True)

    rank = torch.rand(*batch_shape, vocab_size, generator=generator, device=device).argsort(-1).argsort(-1)
    split = torch.randint(1, vocab_size, (*batch_shape, 1), generator=generator, device=device)
    in_a = rank < split
    shared = dirichlet(torch.ones_like(in_a))
    target = alpha * shared + (1 - alpha) * dirichlet(in_a)
    draft = alpha * shared + (1 - alpha) * dirichlet(~in_a)
    return target, draft


def _accept(target_prob: float, draft_prob: float, generator: torch.Generator | None, device: torch.device) -> bool:
    """True with probability min(1, target_prob / draft_prob) (u * draft < target with u ~ U[0, 1))."""
    return torch.rand((), generator=generator, device=device).item() * draft_prob < target_prob


def _sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id from probs [V]."""
    return int(torch.multinomial(probs, 1, generator=generator))


def verify_chain(
    draft_tokens: Sequence[int] | torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[int, int]:
    """Speculative sampling for a chain of k drafts -> (n_accepted, next_token).

    draft_tokens [k]; draft_probs [k, V] (draft token i was sampled from draft_probs[i]);
    target_probs [k + 1, V] (target_probs[i] is the target's distribution at draft position i;
    row k follows the last draft). Left to right, draft token x is accepted with probability
    min(1, target(x) / draft(x)); at the first rejection the next token is sampled from
    `residual(target, draft)` of that position; if all k are accepted, a bonus token is sampled from
    target_probs[k]. The emitted tokens draft_tokens[:n_accepted] + [next_token] are distributed
    exactly as sampling from the target alone: P(emit x) = min(t, d)(x) + (1 - sum min(t, d)) *
    residual(x) = t(x), since 1 - sum min(t, d) = sum max(0, t - d).
    """
    tokens = torch.as_tensor(draft_tokens, device="cpu").tolist()
    k = len(tokens)
    if draft_probs.ndim != 2 or draft_probs.shape[0] != k:
        raise ValueError(f"draft_probs must be [k={k}, V], got {tuple(draft_probs.shape)}")
    if target_probs.shape != (k + 1, draft_probs.shape[1]):
        raise ValueError(
            f"target_probs must be [k+1={k + 1}, V={draft_probs.shape[1]}], got {tuple(target_probs.shape)}"
        )
    for i, x in enumerate(tokens):
        if not _accept(float(target_probs[i, x]), float(draft_probs[i, x]), generator, target_probs.device):
            return i, _sample(residual(target_probs[i], draft_probs[i]), generator)
    return k, _sample(target_probs[k], generator)


def _children(parents: Sequence[int]) -> list[list[int]]:
    """children[i] = the ids of node i's children in index order; ValueError on a malformed tree."""
    validate_parents(parents)
    children: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    return children


def verify_tree(
    tokens: Sequence[int] | torch.Tensor,
    parents: Sequence[int],
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[list[int], int]:
    """Lossless multi-candidate verification of a token tree: recursive rejection sampling over children
    drawn without replacement (the rule of Recursive Speculative Decoding, Jeon et al. 2024; SpecInfer's
    variant draws children with replacement and leaves the draft distribution unchanged).

    tokens [n], parents [n] (parents[0] == -1, parents[i] < i); draft_probs [n, V]: node i's
    children were drawn from draft_probs[i] sequentially WITHOUT replacement (what
    `torch.multinomial(draft_probs[i], w, replacement=False)` does), and children in index order are
    in draw order; target_probs [n, V]: the target's distribution after node i's path.
    Returns (path, next_token): path = accepted node ids from the root (path[0] == 0), next_token =
    the token the target adds after path[-1].

    At a node, with p = target_probs[node] and q = draft_probs[node], try the children in order:
    child x is accepted with probability min(1, p(x) / q(x)); if accepted, descend into it; on
    rejection p <- residual(p, q) = norm(max(0, p - q)) and q <- q without x, renormalized. If every
    child is rejected, next_token is sampled from the final p; at a leaf, it is sampled from
    target_probs[leaf].

    Why the output is exactly the target distribution (per node, by induction on the number of
    children left): with no child left we sample from p. Otherwise the first child x ~ q, and given
    a rejection of x the remaining children are draws from q-without-x, which is exactly the q the
    rest of the procedure uses; by induction the rest emits residual(p, q) whatever x was. So
    P(emit y) = min(p(y), q(y)) + (1 - sum min(p, q)) * residual(p, q)(y) = p(y). A rejected x has
    p(x) < q(x), hence residual mass 0, so p and q stay consistent. Descending, an accepted child's
    subtree was drafted given that child only, so the chain rule gives the target's joint law for
    the whole emitted sequence.
    """
    token_ids = torch.as_tensor(tokens, device="cpu").tolist()
    parent_ids = list(parents)
    children = _children(parent_ids)
    n = len(parent_ids)
    if len(token_ids) != n:
        raise ValueError(f"tokens has {len(token_ids)} entries but parents has {n}")
    if draft_probs.ndim != 2 or draft_probs.shape[0] != n or target_probs.shape != draft_probs.shape:
        raise ValueError(
            f"draft_probs and target_probs must both be [n={n}, V], got {tuple(draft_probs.shape)} and "
            f"{tuple(target_probs.shape)}"
        )
    node, path = 0, [0]
    while children[node]:
        target, draft = target_probs[node], draft_probs[node].clone()
        for child in children[node]:
            x = token_ids[child]
            if _accept(float(target[x]), float(draft[x]), generator, target_probs.device):
                node = child
                path.append(child)
                break
            target = residual(target, draft)
            draft[x] = 0
            draft = draft / draft.sum().clamp_min(torch.finfo(draft.dtype).tiny)
        else:
            return path, _sample(target, generator)
    return path, _sample(target_probs[node], generator)
