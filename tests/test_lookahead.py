"""Lookahead decoding: Jacobi guesses + n-gram pool, verified as one trie; greedy output identical to plain."""
import pytest
import torch

from mini_llm import generate
from tree_spec.core.contracts import Branching, DraftRequest, Proposer
from tree_spec import LookaheadDrafter, lookahead_generate
from tree_spec.core.topology import validate_parents
from tests.spec_models import prompts, random_model


@pytest.fixture(scope="module")
def target():
    return random_model(seed=0)


@pytest.mark.parametrize("window, ngram, candidates", [(1, 2, 0), (4, 4, 2), (6, 3, 4)])
def test_greedy_identity_and_counters(target, window, ngram, candidates):
    for prompt in prompts(target.cfg.vocab_size, 4, length=6):
        expected = generate(target, torch.tensor([prompt], device="cpu"), 40)[0].tolist()
        out = lookahead_generate(target, prompt, 40, window=window, ngram=ngram, candidates=candidates)
        assert out.tokens == expected
        assert out.target_calls == 1 + len(out.accepted_per_call)
        assert len(out.tokens) == out.target_calls + sum(out.accepted_per_call)


def test_eos_stops_like_generate(target):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    full = generate(target, torch.tensor([prompt], device="cpu"), 30)[0].tolist()
    eos = full[12]
    out = lookahead_generate(target, prompt, 30, eos_token_id=eos)
    assert out.tokens == full[: full.index(eos) + 1]


def test_jacobi_converges_and_the_pool_pays(target):
    """With attention outputs zeroed, the next token depends on the current one only (x -> f(x)), so the
    greedy output enters a cycle: Jacobi guesses converge to it and the pool holds its n-grams, so most
    steps accept several tokens. The same prompt on the full model stays exact (tested above)."""
    bigram = random_model(seed=0)
    with torch.no_grad():
        for layer in bigram.layers:
            layer.self_attn.o_proj.weight.zero_()
    prompt = prompts(bigram.cfg.vocab_size, 1, seed=3)[0]
    out = lookahead_generate(bigram, prompt, 120, window=5, ngram=4, candidates=2)
    assert out.tokens == generate(bigram, torch.tensor([prompt], device="cpu"), 120)[0].tolist()
    assert out.tau > 3.0, f"tau {out.tau:.2f}: Jacobi guesses never converged"


def ask(context: list[int], root: int, max_depth: int) -> DraftRequest:
    """A request for a trie at most max_depth deep (the lookahead drafter ignores the shape)."""
    return DraftRequest(context, root, Branching((1,) * max_depth), max_depth)


def test_propose_merges_candidates_into_one_trie():
    drafter = LookaheadDrafter(vocab_size=50, window=3, ngram=3, candidates=2)
    drafter.guesses = [5, 6, 7]
    drafter.pool[9] = [(5, 8), (4, 4)]
    tree = drafter.propose(ask([1, 2, 3], 9, max_depth=3))
    validate_parents(tree.parents)
    # guess chain 9-5-6-7; pool 5-8 shares the node 5; pool 4-4 is a new branch
    assert tree.tokens == [9, 5, 6, 7, 8, 4, 4]
    assert tree.parents == [-1, 0, 1, 2, 1, 0, 5]
    assert drafter.propose(ask([1, 2, 3], 9, max_depth=1)).tokens == [9, 5, 4]


def test_verify_pass_updates_guesses_and_pool():
    drafter = LookaheadDrafter(vocab_size=20, window=3, ngram=3, candidates=0)
    drafter.guesses = [5, 6, 7]
    tokens, parents = drafter.propose(ask([1, 2], 9, max_depth=3))
    # the target predicts 5 after the root (guess 5 accepted), then 11, 12, 13
    predicted = [5, 11, 12, 13]
    logits = torch.nn.functional.one_hot(torch.tensor(predicted, device="cpu"), 20).float()
    drafter.observe_verify(tokens, parents, logits)
    assert drafter.guesses == [12, 13]  # window [5, 11, 12, 13] shifted past the accepted 5 and the bonus 11
    assert drafter.pool[5] == [(11, 12)] and drafter.pool[6] == [(12, 13)]


def test_bad_settings_are_refused_and_it_is_a_whole_tree_proposer(target):
    with pytest.raises(ValueError, match="window"):
        LookaheadDrafter(vocab_size=10, window=0)
    drafter = LookaheadDrafter(vocab_size=10)
    assert isinstance(drafter, Proposer) and not hasattr(drafter, "next_logits")


def test_sampling_is_refused_with_a_reason(target):
    from tree_spec import SamplingParams, tree_speculative_generate

    prompt, sampled = prompts(target.cfg.vocab_size, 1)[0], SamplingParams(1.0, generator=torch.Generator().manual_seed(0))
    drafter = LookaheadDrafter(target.cfg.vocab_size)
    with pytest.raises(ValueError, match="greedy decoding only"):
        tree_speculative_generate(target, drafter, prompt, 8, branching=[1, 1], sampling=sampled)


def test_the_batched_loop_refuses_lookahead_whose_tries_it_cannot_verify(target):
    from tree_spec import batch_speculative_generate

    with pytest.raises(TypeError, match="lookahead_generate"):
        batch_speculative_generate(target, LookaheadDrafter(target.cfg.vocab_size), [prompts(target.cfg.vocab_size, 1)[0]],
                                   16, k=4)
