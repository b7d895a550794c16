"""Chain speculative decoding: greedy identity, counters, edge cases, and end-to-end losslessness."""
import pytest
import torch

from mini_llm import generate, logits_to_probs
from tree_spec import ModelDrafter, SamplingParams, SpecOutput, speculative_generate, tree_speculative_generate
from tree_spec.analysis.stats import chi_square
from tests.spec_models import perturbed_copy, prompts, random_model


@pytest.fixture(scope="module")
def target():
    return random_model(seed=0)


@pytest.fixture(scope="module")
def draft(target):
    return perturbed_copy(target)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_chain_decoding_equals_plain_greedy(target, draft, k):
    accepted = 0
    for prompt in prompts(target.cfg.vocab_size, 6):
        expected = generate(target, torch.tensor([prompt], device="cpu"), 24)[0].tolist()
        out = speculative_generate(target, draft, torch.tensor([prompt], device="cpu"), 24, k=k)
        assert out.tokens == expected
        assert len(out.tokens) == out.target_calls + sum(out.accepted_per_call)
        accepted += sum(out.accepted_per_call)
    assert accepted > 10  # drafts are really accepted, not only corrected


def test_counters_with_a_perfect_and_a_useless_draft(target):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    perfect = speculative_generate(target, target, prompt, 18, k=4)
    # prefill gives 1 token, then 3 steps of 4 accepted + bonus, then a last step limited to 1 draft
    assert perfect.accepted_per_call == [4, 4, 4, 1] and perfect.proposed == 13 and perfect.alpha == 1.0
    assert perfect.target_calls == 5 and perfect.tau == 18 / 5
    assert perfect.proposed_at_depth == [4, 3, 3, 3] and perfect.acceptance_per_position == [1.0] * 4
    useless = speculative_generate(target, random_model(seed=9), prompt, 18, k=4)
    assert useless.tokens == perfect.tokens
    assert useless.tau == pytest.approx(len(useless.tokens) / useless.target_calls)
    assert useless.acceptance_ratio == sum(useless.accepted_per_call) / useless.proposed < 0.2
    assert useless.alpha == sum(useless.accepted_at_depth) / sum(useless.reached_at_depth)


def test_spec_output_definitions():
    out = SpecOutput(tokens=list(range(10)), target_calls=4, accepted_per_call=[3, 1, 2], proposed=12)
    assert out.tau == 2.5 and out.acceptance_ratio == 0.5
    assert SpecOutput().tau == 0.0 and SpecOutput().alpha == 0.0 and SpecOutput().acceptance_ratio == 0.0


def test_two_rates_per_position_and_ratio():
    # chain k=4, three verify passes accepting 4, 1 and 0 drafts
    out = SpecOutput()
    for accepted in (4, 1, 0):
        out.record_verify(accepted, proposed=4, depth=4)
    assert out.reached_at_depth == [3, 2, 1, 1] and out.accepted_at_depth == [2, 1, 1, 1]
    assert out.alpha_at_depth == [2 / 3, 1 / 2, 1.0, 1.0]
    assert out.alpha == 5 / 7  # accepted depths / reached depths: the α of E(α, k)
    assert out.acceptance_ratio == 5 / 12  # accepted / proposed: vLLM's counter
    # for a chain, tokens per verify = 1 + k · ratio
    assert 1 + 4 * out.acceptance_ratio == pytest.approx(sum(a + 1 for a in (4, 1, 0)) / 3)


def test_pooled_sums_first_then_takes_the_ratios():
    short, long = SpecOutput(), SpecOutput(tokens=[1, 2, 3])
    for accepted in (4, 1):
        short.record_verify(accepted, proposed=4, depth=4)
    long.record_verify(0, proposed=2, depth=2)
    short.tokens, short.target_calls, short.draft_calls, long.draft_calls = list(range(10)), 5, 8, 2
    pooled = SpecOutput.pooled([short, long])
    assert pooled.tokens == list(range(10)) + [1, 2, 3] and pooled.target_calls == 6 and pooled.draft_calls == 10
    assert pooled.tau == 13 / 6 != (short.tau + long.tau) / 2  # sums first: not the mean of 2.0 and 3.0
    assert pooled.proposed_at_depth == [3, 3, 2, 2] and pooled.reached_at_depth == [3, 2, 1, 1]
    assert pooled.accepted_at_depth == [2, 1, 1, 1] and pooled.alpha == 5 / 7
    assert pooled.acceptance_ratio == 5 / 10 != (short.acceptance_ratio + long.acceptance_ratio) / 2
    assert SpecOutput.pooled([]).tau == 0.0


def test_sampled_chain_is_reproducible(target, draft):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    runs = [
        speculative_generate(target, draft, prompt, 30, k=3,
                             sampling=SamplingParams(0.9, top_p=0.95, generator=torch.Generator().manual_seed(seed))).tokens
        for seed in (1, 1, 2)
    ]
    assert runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0]) == 30


def third_token_law(model, prompt, temperature):
    """Exact distribution [V] of the third new token when sampling from `model` at `temperature`."""
    V = model.cfg.vocab_size
    with torch.inference_mode():
        p1 = logits_to_probs(model(torch.tensor([prompt], device="cpu"))[0, -1], temperature)
        seq2 = torch.cat((torch.tensor(prompt, device="cpu").expand(V, -1), torch.arange(V, device="cpu")[:, None]), 1)
        p2 = logits_to_probs(model(seq2)[:, -1], temperature)  # [V, V]
        seq3 = torch.cat((seq2.repeat_interleave(V, 0), torch.arange(V, device="cpu").repeat(V)[:, None]), 1)
        p3 = logits_to_probs(model(seq3)[:, -1], temperature).view(V, V, V)
    return torch.einsum("a,ab,abc->c", p1, p2, p3)


@pytest.mark.parametrize("min_path_prob", [0.2, 0.6])
def test_confidence_stopped_chain_equals_plain_greedy_and_stops_early(target, draft, min_path_prob):
    """A chain that stops where the draft's path probability drops below min_path_prob: same tokens as plain
    greedy; it drafts fewer than k on some passes, never more, and always at least one."""
    for prompt in prompts(target.cfg.vocab_size, 4):
        expected = generate(target, torch.tensor([prompt], device="cpu"), 24)[0].tolist()
        out = speculative_generate(target, draft, prompt, 24, k=6, min_path_prob=min_path_prob)
        assert out.tokens == expected
        full = speculative_generate(target, draft, prompt, 24, k=6)
        assert out.proposed < full.proposed
        assert out.proposed >= out.target_calls - 1  # every verify pass after the prefill drafted >= 1 token


def test_confidence_stop_follows_the_draft_path_probability(target, draft):
    """build_draft_tree grows a node only while the product of draft probabilities along its path stays at or above
    the threshold; the chain it returns matches that rule computed by hand."""
    from tree_spec import build_draft_tree
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    context, root = prompt[:-1], prompt[-1]
    tree = build_draft_tree(ModelDrafter(draft), context, root, [1] * 6, min_path_prob=0.5)
    tokens, path = [root], 1.0
    with torch.inference_mode():
        for _ in range(6):
            probs = draft(torch.tensor([context + tokens], device="cpu"))[0, -1].softmax(-1)
            token = int(probs.argmax())
            tokens.append(token)
            path *= float(probs[token])
            if path < 0.5:
                break
    assert tree.tokens == tokens and tree.parents == list(range(-1, len(tokens) - 1))
    with pytest.raises(ValueError, match="min_path_prob"):
        build_draft_tree(ModelDrafter(draft), context, root, [1, 1], min_path_prob=1.5)


def test_confidence_stop_on_a_sampled_tree_whose_nodes_have_different_numbers_of_children():
    """Sampling without replacement gives a node fewer children than its width when its distribution has fewer
    nonzero entries; the path probabilities must follow each node's own children."""
    from tree_spec import Drafter, build_draft_tree

    class Uneven(Drafter):  # the root's row allows 3 tokens; every other row allows 1 (token 5) or 2 (5 and 6)
        def __init__(self):
            super().__init__(8, "cpu")

        def reset(self, max_len):
            pass

        def next_logits(self, context, tokens, parents, frontier):
            rows = torch.full((len(frontier), 8), float("-inf"), device="cpu")
            for i, node in enumerate(frontier):
                allowed = [1, 2, 3] if node == 0 else [5] if node % 2 else [5, 6]
                rows[i, allowed] = 0.0
            return rows

    tree = build_draft_tree(Uneven(), [4], 0, [3, 2, 2], min_path_prob=0.2,
                            sampling=SamplingParams(1.0, generator=torch.Generator().manual_seed(0)))
    # depth 1: three children at 1/3; odd nodes get 1 child (prob 1), even nodes 2 (1/2 each: 1/6 < 0.2, no growth)
    assert tree.parents[:4] == [-1, 0, 0, 0] and len(tree.tokens) == len(tree.parents)
    depth2 = [i for i, p in enumerate(tree.parents) if 1 <= p <= 3]
    assert sorted(tree.parents[i] for i in depth2) == [1, 2, 2, 3]
    assert all(tree.parents[i] in depth2 for i in range(len(tree.parents)) if i > 0 and tree.parents[i] > 3)
    grown = {tree.parents[i] for i in range(len(tree.parents)) if tree.parents[i] > 3}
    assert grown == {i for i in depth2 if tree.parents[i] != 2}  # 1/3 · 1 >= 0.2 grows; 1/3 · 1/2 does not


@pytest.mark.parametrize("method", ["chain k=2", "tree [2, 2]", "chain k=3, confidence stop"])
def test_sampled_decoding_follows_the_target_distribution(method):
    """Third new token of 800 seeded runs vs its exact law (drafts at depths 1 and 2 are verified)."""
    target = random_model(seed=0, vocab_size=24, std=0.35)
    draft = perturbed_copy(target, noise=0.03)
    prompt = [3, 1, 4, 1, 5]
    expected = third_token_law(target, prompt, temperature=1.0)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(target.cfg.vocab_size, device="cpu")
    accepted = 0
    for _ in range(800):
        if method == "chain k=3, confidence stop":  # chains of 1 to 3 drafts: depth 2 is still verified often
            out = speculative_generate(target, draft, prompt, 4, k=3, min_path_prob=0.3,
                                       sampling=SamplingParams(1.0, generator=generator))
        elif method.startswith("chain"):
            out = speculative_generate(target, draft, prompt, 4, k=2,
                                       sampling=SamplingParams(1.0, generator=generator))
        else:
            out = tree_speculative_generate(target, draft, prompt, 4, branching=[2, 2],
                                            sampling=SamplingParams(1.0, generator=generator))
        counts[out.tokens[2]] += 1
        accepted += sum(out.accepted_per_call)
    assert accepted > 400, accepted
    statistic, p_value = chi_square(counts, expected)
    assert p_value > 1e-3, (statistic, p_value)


def test_edge_cases(target, draft):
    prompt = prompts(target.cfg.vocab_size, 1, seed=2)[0]
    assert speculative_generate(target, draft, prompt, 0).tokens == []
    one = speculative_generate(target, draft, prompt, 1)
    assert one.tokens == generate(target, torch.tensor([prompt], device="cpu"), 1)[0].tolist() and one.target_calls == 1
    full = speculative_generate(target, target, prompt, 20, k=4)
    j = next(j for j in range(2, 5) if full.tokens[j] not in full.tokens[:j])  # inside step 1's accepted run
    never = min(set(range(target.cfg.vocab_size)) - set(full.tokens))  # a second EOS id this run never writes
    stopped = speculative_generate(target, target, prompt, 20, k=4, eos_token_id=[full.tokens[j], never])
    assert stopped.tokens == full.tokens[: j + 1] and stopped.target_calls == 2
    with pytest.raises(ValueError, match="max_position_embeddings"):
        speculative_generate(target, draft, [1] * 200, 57)
    with pytest.raises(ValueError, match="k must be"):
        speculative_generate(target, draft, prompt, 5, k=0)
    with pytest.raises(ValueError, match="batch size 1"):
        speculative_generate(target, draft, torch.zeros(2, 3, dtype=torch.long, device="cpu"), 5)
    with pytest.raises(TypeError, match="drafter"):
        speculative_generate(target, "draft", prompt, 5)


EOS_FORMS = {  # eos: the id that stops the run; never: a second id the run never writes
    "int": lambda eos, never: eos,
    "list": lambda eos, never: [eos, never],
    "numpy": lambda eos, never: __import__("numpy").int64(eos),
    "tensor": lambda eos, never: torch.tensor(eos, device="cpu"),
    "tensor_list": lambda eos, never: torch.tensor([eos, never], device="cpu"),
}


@pytest.mark.parametrize("form", sorted(EOS_FORMS))
def test_eos_token_id_means_the_same_in_generate_and_every_loop(target, draft, form):
    from tree_spec import dynamic_tree_speculative_generate, lookahead_generate

    prompt = prompts(target.cfg.vocab_size, 1, seed=2)[0]
    free = generate(target, torch.tensor([prompt], device="cpu"), 20)[0].tolist()
    eos = free[7]
    expected = free[: free.index(eos) + 1]
    eos_arg = EOS_FORMS[form](eos, min(set(range(target.cfg.vocab_size)) - set(free)))
    assert generate(target, torch.tensor([prompt], device="cpu"), 20, eos_token_id=eos_arg)[0].tolist() == expected
    loops = {
        "chain": lambda: speculative_generate(target, draft, prompt, 20, k=4, eos_token_id=eos_arg),
        "tree": lambda: tree_speculative_generate(target, draft, prompt, 20, eos_token_id=eos_arg),
        "dynamic": lambda: dynamic_tree_speculative_generate(target, draft, prompt, 20, eos_token_id=eos_arg),
        "lookahead": lambda: lookahead_generate(target, prompt, 20, eos_token_id=eos_arg),
    }
    for name, run in loops.items():
        assert run().tokens == expected, name


def test_loops_refuse_odd_input(target, draft):
    from tree_spec import dynamic_tree_speculative_generate

    prompt = prompts(target.cfg.vocab_size, 1, seed=2)[0]
    with pytest.raises(ValueError, match="integer tensor"):
        speculative_generate(target, draft, torch.tensor([prompt], device="cpu").float() + 0.4, 5)
    with pytest.raises(ValueError, match="prompt token"):
        speculative_generate(target, draft, [1.7, 2.2], 5)
    with pytest.raises(ValueError, match="empty"):
        speculative_generate(target, draft, torch.zeros(1, 0, dtype=torch.long, device="cpu"), 5)
    for bad in (2.5, "4", True):
        with pytest.raises(ValueError, match="max_new_tokens"):
            speculative_generate(target, draft, prompt, bad)
        with pytest.raises(ValueError, match="k must be"):
            speculative_generate(target, draft, prompt, 5, k=bad)
        with pytest.raises(ValueError, match="branching"):
            tree_speculative_generate(target, draft, prompt, 5, branching=[2, bad])
        with pytest.raises(ValueError, match="width|depth|total_tokens"):
            dynamic_tree_speculative_generate(target, draft, prompt, 5, width=bad)
        with pytest.raises(ValueError, match="depth"):
            dynamic_tree_speculative_generate(target, draft, prompt, 5, depth=bad)
    with pytest.raises(ValueError, match="eos_token_id"):
        speculative_generate(target, draft, prompt, 5, eos_token_id=2.0)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        speculative_generate(target, draft, prompt + [target.cfg.vocab_size], 5)
    with pytest.raises(ValueError, match="branching must be a list"):
        tree_speculative_generate(target, draft, prompt, 5, branching=4)
    with pytest.raises(TypeError, match="target must be a mini_llm Transformer"):
        speculative_generate("tiny-qwen3", draft, prompt, 5)
    with pytest.raises(TypeError, match="sampling must be a SamplingParams"):
        speculative_generate(target, draft, prompt, 5, sampling=1.0)
    # integer-like arguments are integers
    import numpy as np
    expected = speculative_generate(target, draft, prompt, 9, k=3).tokens
    int32_prompt = torch.tensor(prompt, dtype=torch.int32, device="cpu")
    assert speculative_generate(target, draft, int32_prompt, np.int64(9), k=np.int32(3)).tokens == expected


@pytest.mark.parametrize("proposal, problem", [
    (lambda root: ([root + 1, 5], [-1, 0]), "rooted at"),
    (lambda root: ([root, 5], [-1]), "parents"),
    (lambda root: ([root, 99], [-1, 0]), "outside the vocabulary"),
    (lambda root: ([root, 5, 6], [-1, 2, 0]), "a parent must come before its child"),
    (lambda root: ([root] + [5] * 9, [-1] + list(range(9))), "deeper than"),
])
def test_a_drafter_whose_tree_the_loop_cannot_verify_is_named_in_a_clear_error(proposal, problem):
    from tree_spec import DraftTree, Drafter

    target = random_model()

    class Custom(Drafter):  # a learner's drafter that gets one rule of the proposal contract wrong
        def __init__(self):
            super().__init__(target.cfg.vocab_size, "cpu")

        def reset(self, max_len):
            pass

        def propose(self, request):
            return DraftTree(*proposal(request.root))

        def next_logits(self, context, tokens, parents, frontier):
            raise AssertionError("never called: propose is overridden")

    with pytest.raises(ValueError, match=problem) as error:
        tree_speculative_generate(target, Custom(), prompts(target.cfg.vocab_size, 1)[0], 6, branching=[1, 1])
    assert "Custom proposed" in str(error.value)
