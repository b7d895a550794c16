"""Greedy acceptance: the longest drafted path the target agrees with.

The rule has two forms, tested equal: on tensors with no host read (`accept_chain_greedy`, `tree_accepted_nodes`,
`deepest_accepted`) for the batched and fixed-shape loops, which must not read the device, and on host lists
(`accepted_path`) for the list loops, which hold the tree as lists and read the target's argmax once
(`host_argmax`): a handful of Python comparisons instead of a dozen small tensor operations per verify pass."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .topology import depths, validate_parents


def accept_chain_greedy(
    drafts: torch.Tensor, target_logits: torch.Tensor, limit: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy chain acceptance, no host read: drafts [..., k], target_logits [..., k + 1, V] (row i follows draft i,
    row 0 the root) -> (n_accepted [...], next_token [...]).

    The drafts are kept up to the first one that differs from the target's argmax; next_token is the target's
    argmax there (the bonus token when all k agree). limit [...] (optional): accept at most this many per row.
    """
    predicted = target_logits.argmax(-1)                                       # [..., k + 1]
    k = drafts.shape[-1]
    agree = predicted[..., :k] == drafts
    if limit is not None:
        agree &= torch.arange(k, device=drafts.device) < limit[..., None]
    n_accepted = agree.long().cumprod(-1).sum(-1)
    return n_accepted, predicted.gather(-1, n_accepted[..., None])[..., 0]


def tree_accepted_nodes(
    tokens: torch.Tensor, parents: torch.Tensor, ancestors: torch.Tensor, predicted: torch.Tensor
) -> torch.Tensor:
    """Nodes whose whole path the target agrees with, no host read -> bool [n].

    tokens [n], parents [n] (parents[0] is ignored: the root is the target's own token), ancestors [n, n]
    (`tree_mask`: row i marks i and its ancestors), predicted [n] (the target's argmax after each node).
    """
    agrees = tokens == predicted[parents.clamp_min(0)]
    agrees[0] = True
    return ~(ancestors & ~agrees[None]).any(1)


def deepest_accepted(accepted: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """The node where the accepted path ends, no host read: accepted [n] bool (`tree_accepted_nodes`), depth [n]
    -> LongTensor []: the deepest accepted node, the lowest id among equally deep ones."""
    n = accepted.shape[0]
    order = depth * n - torch.arange(n, device=depth.device)  # deeper first, then lower id
    return torch.where(accepted, order, -1).argmax()


def accepted_path(tokens: Sequence[int], parents: Sequence[int], predicted: Sequence[int]) -> list[int]:
    """The host form of `tree_accepted_nodes` + `deepest_accepted`, for loops that hold the tree as lists (they read
    the target's argmax once anyway): tokens [n], parents [n] (parents before children), predicted [n] (the
    target's argmax after each node) -> the accepted path's node ids, starting with 0.

    A node is accepted when its token is the target's argmax after its parent and its parent is accepted; the
    path ends at the deepest accepted node, the lowest id among equally deep ones. A chain is the tree whose
    node i has parent i - 1, so this is `accept_chain_greedy` too."""
    accepted, depth, best = [True] * len(tokens), depths(parents), 0
    for i in range(1, len(tokens)):
        p = parents[i]
        accepted[i] = accepted[p] and tokens[i] == predicted[p]
        if accepted[i] and depth[i] > depth[best]:
            best = i
    path = [best]
    while path[-1]:
        path.append(parents[path[-1]])
    return path[::-1]


def host_argmax(logits: torch.Tensor) -> list[int]:
    """The argmax of each row of logits [n, V], read to the host -> list[int] (the first index on ties).

    On a CPU, numpy's argmax: it is vectorized where torch's CPU argmax runs scalar code (5 rows of 4,096 fp32
    logits: about 3 vs 37 µs on one core, a cost every greedy verify pass pays). Elsewhere, and for dtypes numpy
    lacks (bf16), torch's."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64, torch.float16):
        return logits.detach().numpy().argmax(-1).tolist()
    return logits.argmax(-1).tolist()


def accept_greedy(tokens: Sequence[int], parents: Sequence[int], target_logits: torch.Tensor) -> list[int]:
    """Longest root path the target agrees with -> node ids, starting with 0 (`accepted_path`, checked inputs).

    target_logits [n, V]: row i is the target's prediction after node i's path. A node is accepted when its
    token is the target's argmax after its parent and its parent is accepted; the path ends at the deepest
    accepted node (the lowest id among equally deep ones, should two siblings carry the same token).
    """
    validate_parents(parents)
    if not len(tokens) == len(parents) == target_logits.shape[0]:
        raise ValueError(
            f"tokens ({len(tokens)}), parents ({len(parents)}) and target_logits "
            f"({target_logits.shape[0]} rows) differ in length"
        )
    return accepted_path([int(t) for t in tokens], list(parents), host_argmax(target_logits))
