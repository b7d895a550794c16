"""The list loops' host forms of the greedy rules equal the tensor forms the device loops use, and a drafter's
`next_top` equals the top children of its `next_logits`."""
import random

import pytest
import torch

from mini_llm import KVCache
from tree_spec.core.contracts import TargetFeatures
from tree_spec.core.accept import accepted_path, deepest_accepted, host_argmax, tree_accepted_nodes
from tree_spec.core.growth import rerank, rerank_list, top_children
from tree_spec.core.topology import depths, tree_mask
from tests.spec_models import random_model
from tests.test_drafters import make_drafter


def random_tree(rng: random.Random, n: int, vocab: int) -> tuple[list[int], list[int]]:
    """n nodes, parents before children, tokens from a small vocabulary (so siblings often share a token)."""
    parents = [-1] + [rng.randrange(i) for i in range(1, n)]
    return [rng.randrange(vocab) for _ in range(n)], parents


def test_accepted_path_equals_the_tensor_rule_on_random_trees() -> None:
    rng = random.Random(0)
    for trial in range(400):
        tokens, parents = random_tree(rng, rng.randrange(1, 30), vocab=3)
        predicted = [rng.randrange(3) for _ in tokens]
        accepted = tree_accepted_nodes(torch.tensor(tokens), torch.tensor(parents), tree_mask(parents),
                                       torch.tensor(predicted))
        end = int(deepest_accepted(accepted, torch.tensor(depths(parents))))
        path = accepted_path(tokens, parents, predicted)
        assert path[-1] == end, (tokens, parents, predicted)
        assert path[0] == 0 and all(parents[b] == a for a, b in zip(path, path[1:]))


def test_accepted_path_on_a_chain_stops_at_the_first_disagreement() -> None:
    tokens, parents = [7, 1, 2, 3, 4], [-1, 0, 1, 2, 3]
    assert accepted_path(tokens, parents, [1, 2, 9, 4, 5]) == [0, 1, 2]
    assert accepted_path(tokens, parents, [1, 2, 3, 4, 5]) == [0, 1, 2, 3, 4]
    assert accepted_path(tokens, parents, [0, 2, 3, 4, 5]) == [0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_host_argmax_equals_torch_argmax_with_ties(dtype: torch.dtype) -> None:
    """numpy's argmax (CPU fp32/fp64/fp16) and torch's (elsewhere) pick the same token, the first on ties."""
    logits = torch.randn(7, 300, generator=torch.Generator().manual_seed(0)).round(decimals=1).to(dtype)
    logits[2] = 1.0                                             # a row of ties: index 0
    logits[3, [5, 17, 200]] = 50.0                              # three tied maxima: index 5
    assert host_argmax(logits) == logits.argmax(-1).tolist()
    assert host_argmax(logits)[2:4] == [0, 5]
    assert host_argmax(logits[:, ::2]) == logits[:, ::2].argmax(-1).tolist()  # a strided view
    assert host_argmax(logits.float().requires_grad_()) == logits.argmax(-1).tolist()  # outside inference mode


def test_rerank_list_equals_rerank_with_ties() -> None:
    rng = random.Random(1)
    for trial in range(300):
        m = rng.randrange(1, 60)
        scores = [rng.choice([-0.5, -1.0, -1.5, float("-inf")]) + rng.choice([0.0, 0.0, -1e-3]) for _ in range(m)]
        level = [rng.randrange(1, 6) for _ in range(m)]
        total = rng.randrange(0, m + 3)
        expected = rerank(torch.tensor(scores, dtype=torch.float64), torch.tensor(level), total).tolist()
        assert rerank_list(scores, level, total) == expected


@pytest.mark.parametrize("kind", ["eagle", "mtp", "medusa"])
@pytest.mark.parametrize("reduced", [False, True])
def test_next_top_equals_the_top_children_of_next_logits(kind: str, reduced: bool) -> None:
    target = random_model(seed=0)
    drafter = make_drafter(kind, target)
    vocab = torch.arange(0, target.cfg.vocab_size, 3)
    if reduced:
        drafter.set_draft_vocab(vocab)
    prompt = torch.randint(1, target.cfg.vocab_size, (12,)).tolist()
    drafter.reset(64)
    cache = KVCache(target.cfg, 1, 64)
    _, hidden = target(torch.tensor([prompt]), cache=cache, return_hidden=True)
    drafter.observe(TargetFeatures(hidden[0], ()))
    context, root = prompt, 3  # the root: the token the target gave after the prompt
    tokens, parents = [root, 5, 9, 11], [-1, 0, 0, 1]
    for frontier in ([0], [1, 2], [3]):
        ids, logp = drafter.next_top(context, tokens, parents, frontier, 3)
        want_ids, want_logp = top_children(drafter.next_logits(context, tokens, parents, frontier), 3)
        assert torch.equal(ids, want_ids)
        torch.testing.assert_close(logp, want_logp, rtol=0, atol=1e-5)  # log_softmax over N vs over V (-inf rest)
        if reduced:
            assert set(ids.flatten().tolist()) <= set(vocab.tolist())
