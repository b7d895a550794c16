"""Lossless speculative sampling: the rejection rule for a chain of drafts and for a token tree.

Names: `target_probs` is the distribution we must reproduce (the verifier's), `draft_probs` the
proposer's. Every random draw goes through the `generator` argument.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .topology import children


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



def _accept(target_prob: float, draft_prob: float, generator: torch.Generator | None, device: torch.device) -> bool:
    """True with probability min(1, target_prob / draft_prob) (u * draft < target with u ~ U[0, 1))."""
    return torch.rand((), generator=generator, device=device).item() * draft_prob < target_prob


def sample_on_device(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of probs [..., V] -> [...], with no host read: the argmax of probs / E, E ~ Exp(1) i.i.d.

    P(token i wins) = probs[i] / sum(probs) (the exponential race), so it samples the same law as
    `torch.multinomial(probs, 1)`, from `generator`.
    """
    race = torch.empty_like(probs).exponential_(generator=generator)
    # A draw of exactly 0 (possible in floating point) would make 0 / 0 = NaN for a token of probability 0, and
    # argmax picks NaN: the floor keeps such a token at 0 (it never wins) and a positive one at a finite maximum.
    return (probs / race.clamp_min_(torch.finfo(race.dtype).tiny)).argmax(-1)


def _sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id from probs [V]."""
    return int(torch.multinomial(probs, 1, generator=generator))


def chain_rejection(
    drafts: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Speculative sampling of a chain on tensors, no host read: drafts [k], draft_probs [k, V], target_probs
    [k + 1, V] -> (n_accepted [], next_token []).

    Draft i is accepted when u_i * draft(x_i) < target(x_i) (probability min(1, target / draft)), left to right
    while every earlier one was; the next token is drawn from `residual(target, draft)` at the first rejection,
    or from target_probs[k] (the bonus) when all k are accepted. All k uniforms are drawn at once.
    """
    k = drafts.shape[0]
    rows = torch.arange(k, device=drafts.device)
    u = torch.rand(k, device=target_probs.device, generator=generator)
    n_accepted = (u * draft_probs[rows, drafts] < target_probs[rows, drafts]).long().cumprod(0).sum()
    padded = torch.cat((draft_probs, draft_probs.new_zeros(1, target_probs.shape[-1])))  # row k: the bonus
    row = n_accepted[None]  # [1]: indexing with the 0-dim tensor itself would read it on the host
    next_token = sample_on_device(residual(target_probs[row], padded[row]), generator)[0]
    return n_accepted, next_token


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
    residual(x) = t(x), since 1 - sum min(t, d) = sum max(0, t - d). The rule itself: `chain_rejection`.
    """
    k = len(draft_tokens)
    if draft_probs.ndim != 2 or draft_probs.shape[0] != k:
        raise ValueError(f"draft_probs must be [k={k}, V], got {tuple(draft_probs.shape)}")
    if target_probs.shape != (k + 1, draft_probs.shape[1]):
        raise ValueError(
            f"target_probs must be [k+1={k + 1}, V={draft_probs.shape[1]}], got {tuple(target_probs.shape)}"
        )
    drafts = torch.as_tensor(draft_tokens, dtype=torch.long, device=target_probs.device)
    n_accepted, next_token = chain_rejection(drafts, draft_probs, target_probs, generator)
    return int(n_accepted), int(next_token)


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
    kids = children(parent_ids)
    n = len(parent_ids)
    if len(token_ids) != n:
        raise ValueError(f"tokens has {len(token_ids)} entries but parents has {n}")
    if draft_probs.ndim != 2 or draft_probs.shape[0] != n or target_probs.shape != draft_probs.shape:
        raise ValueError(
            f"draft_probs and target_probs must both be [n={n}, V], got {tuple(draft_probs.shape)} and "
            f"{tuple(target_probs.shape)}"
        )
    node, path = 0, [0]
    while kids[node]:
        target, draft = target_probs[node], draft_probs[node].clone()
        for child in kids[node]:
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
