"""Token trees: topology, drafting with the drafter's own cache, one-pass verification, KV compaction."""
import time
from pathlib import Path

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer, logits_to_probs
from mini_llm.corpus import build_corpus, read_texts
from tree_spec import (
    ModelDrafter, QuantizedSelfDrafter, SamplingParams, accept_greedy, build_draft_tree, depths, positions,
    speculative_generate, tree_mask, tree_speculative_generate,
)
from tree_spec.core.topology import validate_parents
from tests.spec_models import perturbed_copy, prompts, random_model

BRANCHINGS = [[1, 1, 1, 1], [2, 2, 1, 1], [3, 3, 2], [4]]


@pytest.fixture(scope="module")
def target():
    return random_model(seed=0)


@pytest.fixture(scope="module")
def draft(target):
    return perturbed_copy(target)


def fresh_last_logits(model, ids):
    """Next-token logits [V] after `ids`, from a full forward without cache."""
    with torch.inference_mode():
        return model(torch.tensor([ids], device="cpu"))[0, -1]


@pytest.mark.parametrize("parents, problem", [
    ([], "empty"),
    ([0, 0], "wrong root"),
    ([-1, 1], r"parents\[1\] = 1 >= 1"),
    ([-1, 0, 0, 4, 1], r"parents\[3\] = 4 >= 3"),
    ([-1, 0, -1], "only node 0"),
])
def test_malformed_parents_raise_value_error_naming_the_problem(parents, problem):
    for check in (validate_parents, depths, tree_mask):
        with pytest.raises(ValueError, match=problem):
            check(parents)


def test_mask_depths_positions_of_a_two_level_tree():
    parents = [-1, 0, 0, 1, 1, 2]
    assert depths(parents) == [0, 1, 1, 2, 2, 2]
    assert positions(parents, prefix_len=5, device="cpu").tolist() == [5, 6, 6, 7, 7, 7]
    expected = torch.tensor([
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 0],
        [1, 1, 0, 0, 1, 0],
        [1, 0, 1, 0, 0, 1],
    ], dtype=torch.bool, device="cpu")
    assert torch.equal(tree_mask(parents, device="cpu"), expected)


def test_tree_forward_equals_per_path_forward(target):
    context = prompts(target.cfg.vocab_size, 1, length=7)[0]
    parents = [-1, 0, 0, 1, 1, 2, 3, 3, 6]
    tokens = prompts(target.cfg.vocab_size, 1, length=len(parents), seed=3)[0]
    cache = target.new_cache(max_len=32)
    with torch.inference_mode():
        target(torch.tensor([context], device="cpu"), cache=cache)
        logits = target(torch.tensor([tokens], device="cpu"), cache=cache,
                        positions=positions(parents, len(context), "cpu"), mask=tree_mask(parents, "cpu"))[0]
    for node in range(len(parents)):
        path, i = [], node
        while i >= 0:
            path.insert(0, tokens[i])
            i = parents[i]
        torch.testing.assert_close(logits[node], fresh_last_logits(target, context + path), atol=1e-4, rtol=0)


def test_greedy_acceptance_and_compacted_cache_equal_a_fresh_prefill(target):
    """Accept a path through second children (so compact really moves slots), then decode on."""
    context = prompts(target.cfg.vocab_size, 1, length=6)[0]
    root = 5
    c1, c2, c3, c4 = generate(target, torch.tensor([context + [root]], device="cpu"), 4)[0].tolist()
    wrong = lambda t: (t + 1) % target.cfg.vocab_size  # noqa: E731
    tokens = [root, wrong(c1), c1, wrong(c2), c2, c3]
    parents = [-1, 0, 0, 2, 2, 4]
    cache = target.new_cache(max_len=32)
    with torch.inference_mode():
        target(torch.tensor([context], device="cpu"), cache=cache)
        start = cache.length
        pos, mask = positions(parents, start, "cpu"), tree_mask(parents, "cpu")
        logits = target(torch.tensor([tokens], device="cpu"), cache=cache, positions=pos, mask=mask)[0]
        path = accept_greedy(tokens, parents, logits)
        assert path == [0, 2, 4, 5]
        assert int(logits[path[-1]].argmax()) == c4
        cache.compact(start, path)
        assert cache.length == len(context) + 4
        after = target(torch.tensor([[c4]], device="cpu"), cache=cache)[0, -1]
    torch.testing.assert_close(after, fresh_last_logits(target, context + [root, c1, c2, c3, c4]), atol=1e-4, rtol=0)


def test_drafter_logits_equal_fresh_forwards_across_steps(draft):
    """The drafter's cache syncs by common prefix and never keeps tree nodes: every frontier logit
    equals a fresh forward of context + path, step after step."""
    drafter = ModelDrafter(draft)
    drafter.reset(64)
    base = prompts(draft.cfg.vocab_size, 1, length=12, seed=4)[0]
    trees = [  # (tokens, parents, frontier): a chain, a branching tree with a trunk, a bare root
        ([7, 8, 9], [-1, 0, 1], [2]),
        ([7, 3, 4, 5, 6, 1], [-1, 0, 1, 1, 2, 3], [4, 5]),
        ([2, 3, 4, 5], [-1, 0, 0, 1], [2, 3]),
        ([9], [-1], [0]),
    ]
    for context in (base[:8], base[:10], base[:9], base):
        for tokens, parents, frontier in trees:
            logits = drafter.next_logits(context, tokens, parents, frontier)
            for row, node in zip(logits, frontier):
                path, i = [], node
                while i >= 0:
                    path.insert(0, tokens[i])
                    i = parents[i]
                torch.testing.assert_close(row, fresh_last_logits(draft, context + path), atol=1e-4, rtol=0)


def test_build_draft_tree_greedy_and_sampled(draft):
    context, root = prompts(draft.cfg.vocab_size, 1, length=8)[0], 11
    tokens, parents = build_draft_tree(ModelDrafter(draft), context, root, [2, 2, 1, 1])
    assert len(tokens) == 15 and tokens[0] == root
    assert depths(parents).count(1) == 2 and depths(parents).count(4) == 4
    assert tokens[1:3] == fresh_last_logits(draft, context + [root]).topk(2).indices.tolist()

    tree = build_draft_tree(ModelDrafter(draft), context, root, [3, 2],
                            sampling=SamplingParams(0.8, top_k=20, generator=torch.Generator().manual_seed(0)))
    internal = [i for i in range(len(tree.parents)) if i in tree.parents]
    assert internal == [0, 1, 2, 3]
    root_probs = logits_to_probs(fresh_last_logits(draft, context + [root]), 0.8, 20)
    torch.testing.assert_close(tree.draft_probs[0], root_probs)
    assert torch.allclose(tree.draft_probs[internal].sum(-1), torch.ones(4, device="cpu"))
    assert not tree.draft_probs[4:].any()
    for node in internal:
        kids = [tree.tokens[i] for i in range(len(tree.parents)) if tree.parents[i] == node]
        assert len(set(kids)) == len(kids) and (tree.draft_probs[node][kids] > 0).all()
    narrow = build_draft_tree(ModelDrafter(draft), context, root, [3], sampling=SamplingParams(1.0, top_k=2))
    assert len(narrow.tokens) == 3  # only two tokens have nonzero probability


@pytest.mark.parametrize("branching", BRANCHINGS, ids=str)
def test_greedy_tree_decoding_equals_plain_greedy(target, draft, branching):
    total_calls = total_tokens = 0
    for prompt in prompts(target.cfg.vocab_size, 6):
        expected = generate(target, torch.tensor([prompt], device="cpu"), 24)[0].tolist()
        out = tree_speculative_generate(target, draft, prompt, 24, branching=branching)
        assert out.tokens == expected
        assert out.target_calls == 1 + len(out.accepted_per_call)
        assert len(out.tokens) == out.target_calls + sum(out.accepted_per_call)
        total_calls += out.target_calls
        total_tokens += len(out.tokens)
    assert total_tokens / total_calls > 1.2  # the draft helps, so acceptance is really exercised


def test_quantized_self_drafter_keeps_greedy_output(target):
    drafter = QuantizedSelfDrafter(target, bits=4)
    for prompt in prompts(target.cfg.vocab_size, 3, seed=5):
        ids = torch.tensor([prompt], device="cpu")
        out = tree_speculative_generate(target, drafter, ids, 20, branching=[2, 2, 1, 1])
        assert out.tokens == generate(target, ids, 20)[0].tolist()


def test_self_draft_accepts_everything_and_counts(target):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    out = tree_speculative_generate(target, target, prompt, 21, branching=[2, 2, 1, 1])
    assert out.accepted_per_call == [4] * 4 and out.target_calls == 5 and out.tau == 21 / 5
    assert out.proposed == 4 * 14 and out.acceptance_ratio == 16 / 56 and out.alpha == 1.0
    assert out.acceptance_per_position == [1.0] * 4 and out.draft_calls == 4 * 4


def test_sampled_tree_decoding_is_reproducible(target, draft):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    runs = [
        tree_speculative_generate(target, draft, prompt, 30, branching=[2, 2, 1],
                                  sampling=SamplingParams(1.0, generator=torch.Generator().manual_seed(seed))).tokens
        for seed in (3, 3, 4)
    ]
    assert runs[0] == runs[1] and runs[0] != runs[2] and len(runs[0]) == 30


def test_max_new_tokens_zero_and_one(target, draft):
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    empty = tree_speculative_generate(target, draft, prompt, 0)
    assert empty.tokens == [] and empty.target_calls == 0 and empty.tau == 0.0
    one = tree_speculative_generate(target, draft, prompt, 1)
    assert one.tokens == generate(target, torch.tensor([prompt], device="cpu"), 1)[0].tolist() and one.target_calls == 1


def test_eos_inside_an_accepted_run_stops_exactly_there(target):
    prompt = prompts(target.cfg.vocab_size, 1, seed=2)[0]
    full = tree_speculative_generate(target, target, prompt, 20, branching=[1, 1, 1, 1])
    # with the target as its own draft every step accepts 4 drafts; tokens 1..4 come from step 1
    j = next(j for j in range(2, 5) if full.tokens[j] not in full.tokens[:j])
    eos = full.tokens[j]
    out = tree_speculative_generate(target, target, prompt, 20, branching=[1, 1, 1, 1], eos_token_id=eos)
    assert out.tokens == full.tokens[: j + 1]
    assert out.tokens == generate(target, torch.tensor([prompt], device="cpu"), 20, eos_token_id=eos)[0].tolist()
    assert out.accepted_per_call == [j]


def test_overflow_and_bad_arguments_raise(target, draft):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        tree_speculative_generate(target, draft, [1] * 250, 10)
    with pytest.raises(ValueError, match="empty"):
        tree_speculative_generate(target, draft, [], 5)
    with pytest.raises(ValueError, match="branching"):
        tree_speculative_generate(target, draft, [1, 2], 5, branching=[2, 0])
    with pytest.raises(ValueError, match="vocabulary"):
        tree_speculative_generate(target, random_model(vocab_size=50), [1, 2], 5)


# ---------------------------------------------------------------- the embedded target
MODELS = Path(__file__).resolve().parent.parent / "models"
CHAINS, TREES = [1, 2, 4, 8], BRANCHINGS


def load_or_skip(name):
    """The embedded model, retrying while a training run re-exports it; skip when it is absent."""
    if not (MODELS / name / "model.safetensors").exists():
        pytest.skip(f"models/{name} is not there yet")
    for attempt in range(3):
        try:
            return load_model(MODELS / name)
        except (ValueError, OSError):  # a half-written checkpoint
            if attempt == 2:
                raise
            time.sleep(2)


def held_out_prompts(name, n=50, length=24):
    """n token windows spread over the held-out stdlib files (text the model was not trained on)."""
    tokenizer = load_tokenizer(MODELS / name)
    ids = []
    for text in read_texts(build_corpus().held_out_files[:20]):
        ids += tokenizer.encode(text)
    stride = (len(ids) - length) // n
    return [ids[i * stride: i * stride + length] for i in range(n)]


@pytest.fixture(scope="module")
def embedded():
    """(target, separate small draft, 50 held-out prompts, their plain greedy continuations of 16 tokens)."""
    target, small = load_or_skip("tiny-qwen3"), load_or_skip("tiny-qwen3-draft")
    prompts_ = held_out_prompts("tiny-qwen3")
    greedy = [generate(target, torch.tensor([p], device="cpu"), 16)[0].tolist() for p in prompts_]
    return target, small, prompts_, greedy


@pytest.mark.xdist_group("embedded")  # one worker computes the `embedded` fixture for both tests
def test_embedded_target_greedy_identity_on_50_prompts(embedded):
    """Chain k=4 with the separate small draft, tree [2, 2, 1, 1] with the INT4 self draft."""
    target, small, prompts_, expected = embedded
    quantized = QuantizedSelfDrafter(target, bits=4)
    chain = [speculative_generate(target, small, p, 16, k=4) for p in prompts_]
    tree = [tree_speculative_generate(target, quantized, p, 16, branching=[2, 2, 1, 1]) for p in prompts_]
    assert [out.tokens for out in chain] == expected
    assert [out.tokens for out in tree] == expected
    assert sum(len(out.tokens) for out in tree) / sum(out.target_calls for out in tree) > 1.5


@pytest.mark.slow
@pytest.mark.xdist_group("embedded")
@pytest.mark.parametrize("shape", CHAINS + TREES, ids=str)
def test_embedded_target_greedy_identity_every_shape(embedded, shape):
    """Chains k in {1, 2, 4, 8} and trees [1,1,1,1], [2,2,1,1], [3,3,2], [4], separate small draft, on 16 of the
    50 prompts (spread over the held-out files): the 50-prompt test above covers the two main configurations."""
    target, small, prompts_, expected = embedded
    prompts_, expected = prompts_[::3][:16], expected[::3][:16]
    if isinstance(shape, int):
        outs = [speculative_generate(target, small, p, 16, k=shape) for p in prompts_]
    else:
        outs = [tree_speculative_generate(target, small, p, 16, branching=shape) for p in prompts_]
    assert [out.tokens for out in outs] == expected


def test_widths_must_be_integers(target, draft):
    from tree_spec import build_dynamic_tree

    for bad in (2.0, 1.5, "2", None):
        with pytest.raises(ValueError, match="branching"):
            build_draft_tree(ModelDrafter(draft), [1, 2, 3], 4, [2, bad])
        with pytest.raises(ValueError, match="total_tokens"):
            build_dynamic_tree(ModelDrafter(draft), [1, 2, 3], 4, depth=3, total_tokens=bad, width=2)
    import numpy as np
    assert build_draft_tree(ModelDrafter(draft), [1, 2, 3], 4, [np.int64(2), torch.tensor(1, device="cpu")]).parents == \
        build_draft_tree(ModelDrafter(draft), [1, 2, 3], 4, [2, 1]).parents
