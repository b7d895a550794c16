"""Draft sources behind one interface: n-gram, Medusa, EAGLE-1/3, MTP heads, EAGLE-2 dynamic trees."""
import pytest
import torch

from mini_llm import generate, logits_to_probs
from tree_spec import build_draft_tree, ModelDrafter, SamplingParams, speculative_generate, tree_speculative_generate
from tree_spec.core.topology import validate_parents
from tree_spec.drafters.base import Drafter
from tree_spec.core.contracts import TargetFeatures
from tree_spec.core.growth import build_dynamic_tree
from tree_spec.decoding.dynamic import dynamic_tree_speculative_generate
from tree_spec.drafters.features import HeadDrafter, MedusaDrafter
from tree_spec.drafters.heads import HEAD_KINDS, make_head
from tree_spec.drafters.ngram import NGramDrafter, ngram_continuations
from tree_spec.core.topology import depths
from tests.spec_models import perturbed_copy, prompts, random_model


@pytest.fixture(scope="module")
def target():
    return random_model(seed=0)


def make_drafter(kind, target, seed=0):
    """A freshly initialized (untrained) drafter: greedy identity must hold for ANY draft."""
    torch.manual_seed(seed)
    if kind == "ngram":
        return NGramDrafter(target.cfg.vocab_size)
    if kind == "small":
        return ModelDrafter(perturbed_copy(target))
    with torch.device("cpu"):
        head = make_head(kind, target.cfg)
    if kind == "medusa":
        with torch.no_grad():
            for block in head.blocks:
                block.weight.normal_(0, 0.3)
        return MedusaDrafter(target, head)
    return HeadDrafter(target, head)


@pytest.mark.parametrize("kind", ["ngram", *HEAD_KINDS])
def test_greedy_identity_chain_tree_and_dynamic_tree(target, kind):
    drafter = make_drafter(kind, target)
    for prompt in prompts(target.cfg.vocab_size, 3, length=10, seed=7):
        expected = generate(target, torch.tensor([prompt], device="cpu"), 20)[0].tolist()
        assert speculative_generate(target, drafter, prompt, 20, k=3).tokens == expected
        assert tree_speculative_generate(target, drafter, prompt, 20, branching=[2, 2, 1]).tokens == expected
        dynamic = dynamic_tree_speculative_generate(target, drafter, prompt, 20, depth=3, total_tokens=8, width=3)
        assert dynamic.tokens == expected
        stopped = dynamic_tree_speculative_generate(target, drafter, prompt, 20, depth=4, total_tokens=8, width=2,
                                                    min_path_prob=0.3)
        assert stopped.tokens == expected


@pytest.mark.parametrize("kind", ["ngram", "small", "eagle3", "medusa"])
def test_sampled_runs_are_reproducible(target, kind):
    drafter = make_drafter(kind, target)
    prompt = prompts(target.cfg.vocab_size, 1, seed=3)[0]

    def run(seed, dynamic):
        g = torch.Generator().manual_seed(seed)
        if dynamic:
            return dynamic_tree_speculative_generate(target, drafter, prompt, 24, depth=3, total_tokens=6, width=2,
                                                     sampling=SamplingParams(1.0, generator=g)).tokens
        return speculative_generate(target, drafter, prompt, 24, k=3, sampling=SamplingParams(1.0, generator=g)).tokens

    for dynamic in (False, True):
        a, b, c = run(5, dynamic), run(5, dynamic), run(6, dynamic)
        assert a == b and a != c and len(a) == 24


def test_the_loop_hands_feature_drafters_one_row_per_context_token(target):
    class Recorder(NGramDrafter):
        feature_layers = (0,)

        def reset(self, max_len):
            self.rows = 0

        def observe(self, features):
            assert features.hidden.shape[1] == features.layers[0].shape[1] == target.cfg.hidden_size
            self.rows += features.hidden.shape[0]

        def next_logits(self, context, tokens, parents, frontier):
            assert self.rows == len(context)
            return super().next_logits(context, tokens, parents, frontier)

    prompt = prompts(target.cfg.vocab_size, 1, seed=4)[0]
    expected = generate(target, torch.tensor([prompt], device="cpu"), 16)[0].tolist()
    assert speculative_generate(target, Recorder(target.cfg.vocab_size), prompt, 16, k=3).tokens == expected
    assert tree_speculative_generate(target, Recorder(target.cfg.vocab_size), prompt, 16, [2, 1]).tokens == expected


@pytest.mark.parametrize("max_len", [64, 12])  # 12: the tree nodes overflow the head cache, which must grow
@pytest.mark.parametrize("kind", ["eagle", "eagle3", "mtp"])
def test_head_drafter_logits_equal_a_cache_free_reference(target, kind, max_len):
    """Frontier logits (cached committed pairs + tree nodes kept in the cache within a step) equal running
    the head from scratch over the pairs and the node's path, one causal pass per depth, without any cache:
    for a tree, then for a chain in the next step (two more committed tokens; the tree's slots are dropped)."""
    drafter = make_drafter(kind, target, seed=1)
    head = drafter.head
    full = prompts(target.cfg.vocab_size, 1, length=12, seed=8)[0]
    with torch.inference_mode():
        _, hidden, layers = target(torch.tensor([full], device="cpu"), return_hidden=True, hidden_layers=[0, 1])
    feats = TargetFeatures(hidden[0], tuple(layers[0][0] if i == 0 else layers[1][0] for i in head.feature_layers))
    drafter.reset(max_len)
    drafter.observe(feats.rows(range(9)))
    steps = [  # (committed context, tree tokens, parents, frontiers in call order)
        (full[:9], [full[9], 7, 8, 9, 11, 12], [-1, 0, 0, 1, 1, 3], ([0], [1, 2], [3, 4], [5])),
        (full[:11], [full[11], 3, 4, 6, 2], [-1, 0, 1, 2, 3], ([0], [1], [2], [3], [4])),
    ]
    for context, tokens, parents, frontiers in steps:
        drafter.observe(feats.rows(range(drafter.seen, len(context))))
        for frontier in frontiers:
            got = drafter.next_logits(context, tokens, parents, frontier)
            for row, node in zip(got, frontier):
                path = []
                while node >= 0:
                    path.insert(0, tokens[node])
                    node = parents[node]
                want = reference_logits(target, head, feats.rows(range(len(context))), context, path)
                torch.testing.assert_close(row, want, atol=1e-4, rtol=0)


def reference_logits(target, head, feats, context, path):
    with torch.inference_mode():
        g = head.encode(feats.hidden, feats.layers)  # [L, C]
        seq = context + path
        inputs = [g[t - 1] for t in range(1, len(context) + 1)]
        for d in range(len(path)):
            n = len(context) + d  # pairs at positions 1..n
            x = torch.stack(inputs)[None]
            out = head(x, target.embed_tokens(torch.tensor([seq[1:n + 1]], device="cpu")),
                       torch.arange(1, n + 1, device="cpu"), None,
                       torch.ones(n, n, dtype=torch.bool, device="cpu").tril())
            inputs.append(out[0, -1])
        return target.logits_from_hidden(out[0, -1])


class FixedDrafter(Drafter):
    """Every node gets the same draft distribution: tokens 0, 1, 2 with probabilities 0.5, 0.3, 0.2."""

    def __init__(self):
        super().__init__(8, "cpu")

    def reset(self, max_len):
        pass

    def next_logits(self, context, tokens, parents, frontier):
        probs = torch.tensor([0.5, 0.3, 0.2] + [1e-9] * 5, device="cpu")
        return probs.log().expand(len(frontier), -1)


def test_dynamic_tree_keeps_the_best_total_tokens_nodes():
    tokens, parents = build_dynamic_tree(FixedDrafter(), [1, 2], 7, depth=2, total_tokens=3, width=2)
    # candidates: a .5, b .3 | aa .25, ab .15, ba .15, bb .09 -> keep a, b, aa
    assert (tokens, parents) == ([7, 0, 1, 0], [-1, 0, 0, 1])


@pytest.mark.parametrize("theta, depth", [(0.0, 4), (0.3, 3), (0.5, 2), (1.0, 1)])
def test_dynamic_depth_stop_ends_the_expansion_where_the_frontier_mass_falls_below_theta(theta, depth):
    """Width 2 on fixed probabilities .5/.3/.2: the two nodes expanded next hold path probability .8 after level 1,
    .25 + .15 = .40 after level 2, .125 + .075 = .20 after level 3; the expansion stops at the first below θ."""
    tokens, parents = build_dynamic_tree(FixedDrafter(), [1, 2], 7, depth=4, total_tokens=30, width=2,
                                         min_path_prob=theta)
    assert max(depths(parents)) == depth
    assert len(tokens) == 1 + 2 + 4 * (depth - 1)  # every candidate kept: 2 at level 1, then 2 x 2 per level


def test_dynamic_depth_stop_at_width_one_is_the_chains_confidence_stop(target):
    drafter = make_drafter("small", target)
    for context in prompts(target.cfg.vocab_size, 4, length=8, seed=11):
        for theta in (0.05, 0.3, 0.7):
            chain = build_draft_tree(drafter, context, 3, [1] * 6, min_path_prob=theta)
            dynamic = build_dynamic_tree(drafter, context, 3, depth=6, width=1, total_tokens=6, min_path_prob=theta)
            assert (dynamic.tokens, dynamic.parents) == (chain.tokens, chain.parents)
    with pytest.raises(ValueError, match="min_path_prob"):
        build_dynamic_tree(drafter, [1], 3, depth=2, width=2, total_tokens=3, min_path_prob=1.5)


def test_dynamic_tree_has_exactly_total_tokens_nodes_and_is_valid(target):
    drafter = make_drafter("small", target)
    context = prompts(target.cfg.vocab_size, 1, seed=9)[0]
    for depth, top_k, total in ((4, 3, 10), (6, 4, 24), (3, 2, 5)):
        tree = build_dynamic_tree(drafter, context, 3, depth, top_k, total)
        validate_parents(tree.parents)
        assert len(tree.tokens) == total + 1 and max(depths(tree.parents)) <= depth
        for node in range(len(tree.tokens)):
            kids = [tree.tokens[i] for i, p in enumerate(tree.parents) if p == node]
            assert len(kids) == len(set(kids)) <= top_k
        sampled = build_dynamic_tree(drafter, context, 3, depth, top_k, total,
                                     sampling=SamplingParams(1.0, generator=torch.Generator().manual_seed(0)))
        validate_parents(sampled.parents)
        assert len(sampled.tokens) == total + 1
        internal = sorted(set(sampled.parents) - {-1})
        assert torch.allclose(sampled.draft_probs[internal].sum(-1), torch.ones(len(internal), device="cpu"))


def test_ngram_proposes_the_continuation_of_the_longest_matching_suffix():
    seq = [1, 2, 3, 9, 4, 2, 3, 8, 1, 2, 3]
    assert ngram_continuations(seq) == (3, [9])  # "1 2 3" beats the more recent "2 3 -> 8"
    assert ngram_continuations([5, 6, 7]) == (0, [])
    assert ngram_continuations([4, 1, 5, 1, 6, 1], max_ngram=3) == (1, [6, 5])  # most recent first
    drafter = NGramDrafter(vocab_size=16)
    tokens, parents = build_draft_tree(drafter, seq[:-1], seq[-1], [1, 1])
    assert tokens == [3, 9, 4]  # copies what followed "1 2 3", then what followed "... 3 9"
    context, root = [4, 1, 5, 1, 6, 4, 1, 6], 1
    two = drafter.next_logits(context, [root], [-1], [0]).topk(2).indices[0].tolist()
    assert two == [6, 5]  # no longer suffix of "... 6 1" recurs; after "1" came 6 twice, 5 once


def test_ngram_draft_mass_stays_on_the_continuations_at_any_serving_temperature():
    drafter = NGramDrafter(vocab_size=4096)
    lone = drafter.next_logits([7, 8, 9, 7, 8], [9], [-1], [0])  # "8 9" was followed by 7 only
    shared = drafter.next_logits([4, 1, 5, 1, 6, 4, 1, 6], [1], [-1], [0])  # after "1": 6 twice, 5 once
    for temperature in (0.7, 1.0, 1.5, 2.0):
        assert logits_to_probs(lone, temperature)[0, 7].item() == 1.0  # a deterministic draft: accepted with p(x)
        probs = logits_to_probs(shared, temperature)[0]
        assert probs[[5, 6]].sum().item() == pytest.approx(1.0, abs=1e-6) and probs[6] > probs[5]
    assert torch.equal(drafter.next_logits([1, 2, 3], [4], [-1], [0]), torch.zeros(1, 4096))  # no match: flat


class PathDrafter(Drafter):
    """Toy drafter over 5 tokens whose distribution depends on the node's path (seeded by its tokens)."""

    def __init__(self):
        super().__init__(5, "cpu")

    def reset(self, max_len):
        pass

    def next_logits(self, context, tokens, parents, frontier):
        return torch.stack([path_logits(tokens, parents, node, salt=1) for node in frontier])


def path_logits(tokens, parents, node, salt):
    key = salt
    while node >= 0:
        key = key * 31 + int(tokens[node]) + 1
        node = parents[node]
    return 2.0 * torch.randn(5, generator=torch.Generator().manual_seed(key), device="cpu")


@pytest.mark.parametrize("depth, theta", [(2, 0.0), (3, 0.4)])
def test_sampled_dynamic_tree_verification_is_lossless(depth, theta):
    """Budget-limited dynamic trees under sampling, with and without the depth stop: the first emitted token
    follows the target's distribution (a sanity check of the sampled path: at this sample size it does not
    separate the rank-based scores from naive value-based ones, see `core.growth` for the argument)."""
    from tree_spec import verify_tree
    from tree_spec.analysis.stats import chi_square

    gen, counts = torch.Generator().manual_seed(0), torch.zeros(5, device="cpu")
    for _ in range(3000):
        tree = build_dynamic_tree(PathDrafter(), [0], 1, depth=depth, total_tokens=3, width=3,
                                  sampling=SamplingParams(1.0, generator=gen), min_path_prob=theta)
        target_probs = torch.stack([torch.softmax(path_logits(tree.tokens, tree.parents, i, salt=2), -1)
                                    for i in range(len(tree.tokens))])
        path, next_token = verify_tree(tree.tokens, tree.parents, tree.draft_probs, target_probs, gen)
        counts[tree.tokens[path[1]] if len(path) > 1 else next_token] += 1
    expected = torch.softmax(path_logits([1], [-1], 0, salt=2), -1)
    assert chi_square(counts, expected)[1] > 1e-3


def test_ngram_drafter_logits_live_on_its_device():
    drafter = NGramDrafter(64, device="meta")  # meta: any hidden CPU tensor would show as a device mismatch
    logits = drafter.next_logits([1, 2, 3, 1, 2], [3], [-1], [0])
    assert logits.device.type == "meta" and logits.shape == (1, 64)



@pytest.mark.parametrize("kind", ["medusa", "eagle", "eagle3", "mtp"])
def test_a_head_built_for_another_model_is_refused_with_the_reason(kind):
    from tree_spec.drafters.head_io import drafter_for

    small, wide = random_model(), random_model(hidden_size=96)
    with pytest.raises(ValueError, match="features of width 96, the target's are 64 wide"):
        drafter_for(small, make_head(kind, wide.cfg))
