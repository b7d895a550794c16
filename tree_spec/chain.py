"""Chain speculative decoding: draft k tokens, verify them in one causal target forward, roll back by truncate."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from mini_llm import KVCache, Transformer, logits_to_probs
from mini_llm.generate import as_int

from .drafters import Drafter
from .output import SpecOutput
from .sampling import verify_chain
from .tree import build_draft_tree, speculate, target_forward


@torch.inference_mode()
def speculative_generate(
    target: Transformer,
    drafter: Drafter | Transformer,
    prompt_ids: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    k: int = 4,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_token_id: int | Sequence[int] | torch.Tensor | None = None,
    min_path_prob: float = 0.0,
) -> SpecOutput:
    """Each step: the drafter proposes k tokens, the target scores [root, d_1..d_k] in one forward.

    Greedy (temperature 0) keeps the drafts up to the first disagreement and appends the target's
    own token there (the bonus token if all k agree): exactly `generate(target, prompt, n)`.
    Sampling uses `verify_chain` (min(1, target/draft) acceptance, residual on rejection).
    The cache keeps root + accepted drafts: `truncate(start + 1 + n_accepted)`.
    min_path_prob > 0 stops a chain early, before k, once the product of its drafts' draft probabilities falls
    below it (`build_draft_tree`); pair it with a larger k.
    prompt_ids: list[int] or LongTensor [1, T]. Returns SpecOutput with the new tokens only.
    Greedy identity is exact in fp32; in bf16 a near-tie between two logits may flip (the verify pass
    and plain decoding batch the same tokens differently, so their roundings differ).
    """
    k = as_int(k, "k")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    device = target.device

    def step(drafter: Drafter, cache: KVCache, context: list[int], root: int, max_depth: int):
        tree = build_draft_tree(
            drafter, context, root, [1] * min(k, max_depth), temperature, top_k, top_p, generator, min_path_prob
        )
        drafts = tree.tokens[1:]
        n_draft = len(drafts)
        start = cache.length
        ids = torch.tensor([tree.tokens], device=device)
        logits, feats = target_forward(target, drafter, ids, cache)  # [n_draft + 1, V]
        drafter.observe_verify(tree.tokens, tree.parents, logits)
        if temperature == 0.0:
            predicted = logits.argmax(-1).tolist()
            n_accepted = 0
            while n_accepted < n_draft and predicted[n_accepted] == drafts[n_accepted]:
                n_accepted += 1
            next_token = predicted[n_accepted]
        else:
            target_probs = logits_to_probs(logits, temperature, top_k, top_p)
            draft_probs = tree.draft_probs[:n_draft].to(device)
            n_accepted, next_token = verify_chain(drafts, draft_probs, target_probs, generator)
        cache.truncate(start + 1 + n_accepted)
        return drafts[:n_accepted], next_token, n_draft, n_draft, feats and feats.rows(range(n_accepted + 1))

    return speculate(
        target, drafter, prompt_ids, max_new_tokens, k + 1, step, temperature, top_k, top_p, generator, eos_token_id
    )
