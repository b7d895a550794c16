"""The fixed-shape GPU path: FixedShapeCache, CUDA graph capture, plain, chain and dynamic-tree decoding with one host
read per step.

On the CPU every test runs the same fixed-shape code eagerly (graphs need CUDA; tests/test_fixed_shape_sync.py
checks there that no step reads the device); the `cuda` tests also capture graphs, check the graphed tokens against
the eager ones, and run each step under `torch.cuda.set_sync_debug_mode("error")`.
"""
from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

from mini_llm import Transformer, generate, load_model, load_tokenizer
from mini_llm.cache import FixedShapeCache
from mini_llm.graphs import CapturedCall, FixedShapeDecoder, fixed_shape_generate
from tree_spec import NGramDrafter, dynamic_tree_speculative_generate, load_head, speculative_generate
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.analysis.stats import chi_square
from tree_spec.core.contracts import SamplingParams
from tree_spec.core.sampling import sample_on_device
from tree_spec.core.topology import tree_mask
from tree_spec.fixed_shape.chain import FixedShapeChain, fixed_shape_speculative_generate
from tree_spec.fixed_shape.tree import FixedShapeDynamicTree, fixed_shape_dynamic_tree_generate
from tests.spec_models import perturbed_copy, prompts, random_model
from tests.test_chain import third_token_law
from tests.test_devices import CUDA, device, make_drafter, target  # noqa: F401 (device, target: fixtures, CPU and CUDA)

from .conftest import REPO

FIXED_SHAPE_DRAFTERS = ["small model", "INT4 self", "EAGLE", "EAGLE draft_vocab", "EAGLE-3", "MTP"]


@torch.inference_mode()
def test_static_cache_gives_the_kv_cache_logits(device: str, target: Transformer) -> None:
    """Prefill, decode, a tree verify with rollback, a compacted path: the same logits from both caches
    (fp32; the static cache attends over all max_len slots, masked, so sums run in another order: 1e-4)."""
    ids = torch.tensor([prompts(target.cfg.vocab_size, 1, length=9, seed=3)[0]], device=device)
    dynamic, static = target.new_cache(1, 40), FixedShapeCache(target.cfg, 40, target.dtype, target.device)
    parents = [-1, 0, 0, 1, 2]
    tree = torch.tensor([[5, 6, 7, 8, 9]], device=device)
    depth = torch.tensor([0, 1, 1, 2, 2], device=device)
    for cache in (dynamic, static):
        cache.out = [target(ids, cache=cache)[0], target(ids[:, :1], cache=cache)[0]]
        start = 10
        cache.out.append(target(tree, cache=cache, positions=(start + depth)[None], mask=tree_mask(parents, device))[0])
    for cache in (dynamic, static):  # keep the path 0 -> 2 -> 4, then decode after it
        if cache is dynamic:
            cache.compact(10, [0, 2, 4])
        else:
            cache.compact(torch.tensor(10, device=device), torch.tensor([0, 2, 4], device=device),
                          torch.tensor(3, device=device))
        cache.out.append(target(ids[:, 3:5], cache=cache)[0])
        cache.truncate(11)
        cache.out.append(target(ids[:, 6:7], cache=cache)[0])
    for a, b in zip(dynamic.out, static.out):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
    assert int(static.length) == dynamic.length == 12


def test_static_generate_equals_generate(device: str, target: Transformer) -> None:
    for prompt in prompts(target.cfg.vocab_size, 3, length=7, seed=5):
        ids = torch.tensor([prompt], device=device)
        expected = generate(target, ids, 20)
        assert torch.equal(fixed_shape_generate(target, ids, 20), expected)
        eos = int(expected[0, 4])
        assert torch.equal(fixed_shape_generate(target, ids, 20, eos_token_id=eos), generate(target, ids, 20, eos_token_id=eos))
        sampled = [fn(target, ids, 12, temperature=0.8, top_k=20, generator=torch.Generator(device).manual_seed(1))
                   for fn in (fixed_shape_generate, generate)]
        assert torch.equal(*sampled)  # the same draws, in the same order, from the same generator
    assert fixed_shape_generate(target, ids, 0).shape == (1, 0)
    with pytest.raises(ValueError, match="batch 1"):
        fixed_shape_generate(target, ids.expand(2, -1), 4)


@pytest.mark.parametrize("kind", FIXED_SHAPE_DRAFTERS)
def test_fixed_shape_chain_greedy_identity(device: str, target: Transformer, kind: str) -> None:
    """Any drafter (untrained heads included): the tokens of `generate`, and the same accepted counts as
    the list-based loop (both verify the same drafts; the heads' drafts agree up to kernel rounding)."""
    drafter = make_drafter(kind, target)
    for prompt in prompts(target.cfg.vocab_size, 2, length=10, seed=7):
        expected = generate(target, torch.tensor([prompt], device=device), 16)[0].tolist()
        for k in (1, 3):
            out = fixed_shape_speculative_generate(target, drafter, prompt, 16, k=k)
            assert out.tokens == expected, (kind, k)
            assert out.target_calls == len(out.accepted_per_call) + 1 and len(out.tokens) == 16
    eos = expected[5]
    with_eos = fixed_shape_speculative_generate(target, drafter, prompt, 16, k=3, eos_token_id=eos)
    assert with_eos.tokens == speculative_generate(target, drafter, prompt, 16, k=3, eos_token_id=eos).tokens


def test_one_decoder_and_one_chain_serve_many_requests(device: str, target: Transformer) -> None:
    """Captured once, replayed for every request: each request's tokens are generate's, whatever came before
    (caches reset, drafter state restarted), and a request that does not fit max_len is refused."""
    decoder = FixedShapeDecoder(target, max_len=40)
    chain = FixedShapeChain(target, make_drafter("EAGLE", target), max_len=40, k=3)
    for length in (12, 5, 9):
        prompt = prompts(target.cfg.vocab_size, 1, length=length, seed=length)[0]
        expected = generate(target, torch.tensor([prompt], device=device), 20)
        assert torch.equal(decoder.generate(prompt, 20), expected)
        assert chain.generate(prompt, 20).tokens == expected[0].tolist()
    with pytest.raises(ValueError, match="max_len"):
        chain.generate(prompt, 30)


@pytest.mark.parametrize("kind", ["EAGLE", "EAGLE draft_vocab", "EAGLE-3", "MTP"])
def test_fixed_shape_dynamic_tree_greedy_identity(device: str, target: Transformer, kind: str) -> None:
    """EAGLE-2 trees in fixed shapes give generate's tokens, with untrained heads too. (Untrained heads
    score many candidates almost alike, so kernel rounding may pick another tree than the list-based
    dynamic tree; the trained heads pick the same trees:
    test_shipped_heads_fixed_shape_chain_and_tree_on_the_embedded_model.)"""
    drafter = make_drafter(kind, target)
    for prompt in prompts(target.cfg.vocab_size, 2, length=10, seed=7):
        expected = generate(target, torch.tensor([prompt], device=device), 16)[0].tolist()
        for shape in (dict(depth=3, width=3, total_tokens=8), dict(depth=1, width=2, total_tokens=2)):
            out = fixed_shape_dynamic_tree_generate(target, drafter, prompt, 16, **shape)
            assert out.tokens == expected, (kind, shape)


def test_fixed_shape_dynamic_tree_refuses_what_it_cannot_run(target: Transformer) -> None:
    with pytest.raises(ValueError, match="recurrent head"):
        FixedShapeDynamicTree(target, make_drafter("small model", target), 64)
    with pytest.raises(ValueError, match="candidates"):
        FixedShapeDynamicTree(target, make_drafter("EAGLE", target), 64, depth=2, width=2, total_tokens=7)


def test_fixed_shape_chain_refuses_drafters_it_cannot_run(target: Transformer) -> None:
    with pytest.raises(ValueError, match="use speculative_generate"):
        fixed_shape_speculative_generate(target, NGramDrafter(target.cfg.vocab_size, device=target.device), [1, 2, 3],
                                         8)
    with pytest.raises(ValueError, match="k must be"):
        fixed_shape_speculative_generate(target, make_drafter("small model", target), [1, 2, 3], 8, k=0)


def test_fixed_shape_loops_refuse_a_request_whose_last_steps_would_pass_the_position_limit(target: Transformer) -> None:
    limit = target.cfg.max_position_embeddings
    prompt = prompts(target.cfg.vocab_size, 1, length=limit - 6)[0]
    assert generate(target, torch.tensor([prompt], device=target.device), 6).shape[1] == 6  # plain decoding: fine
    with pytest.raises(ValueError, match="max_position_embeddings"):  # k = 4: the last steps would draft past it
        fixed_shape_speculative_generate(target, make_drafter("small model", target), prompt, 6, k=4)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        fixed_shape_dynamic_tree_generate(target, make_drafter("EAGLE", target), prompt, 6, depth=4, width=2,
                                          total_tokens=6)
    short = fixed_shape_speculative_generate(target, make_drafter("small model", target), prompt, 1, k=4)
    assert short.tokens == generate(target, torch.tensor([prompt], device=target.device), 1)[0].tolist()


def test_sample_on_device_follows_probs() -> None:
    """The exponential race picks token i with probability probs[i] (chi-square over 20000 draws)."""
    probs = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05, 0.0], device="cpu")  # with its CPU generator, on any default device
    g = torch.Generator().manual_seed(0)
    draws = sample_on_device(probs.expand(20000, -1).contiguous(), g)
    counts = torch.bincount(draws, minlength=6).float()
    assert counts[5] == 0
    assert chi_square(counts[:5], probs[:5])[1] > 1e-3


def test_sample_on_device_never_picks_a_zero_probability_token_when_a_race_draw_is_zero(monkeypatch) -> None:
    monkeypatch.setattr(torch.Tensor, "exponential_", lambda self, generator=None: self.zero_())  # every draw 0.0
    assert sample_on_device(torch.tensor([[0.0, 0.3, 0.7, 0.0]], device="cpu"), None).tolist() in ([1], [2])


@pytest.mark.slow
def test_fixed_shape_sampled_chain_follows_the_target_distribution() -> None:
    """Third new token of 800 seeded fixed-shape chain runs (k = 2: depths 1 and 2 verified) vs its exact law."""
    target = random_model(seed=0, vocab_size=24, std=0.35)
    draft = perturbed_copy(target, noise=0.03)
    prompt = [3, 1, 4, 1, 5]
    expected = third_token_law(target, prompt, temperature=1.0)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(target.cfg.vocab_size, device="cpu")
    accepted = 0
    for _ in range(800):
        out = fixed_shape_speculative_generate(target, draft, prompt, 4, k=2,
                                               sampling=SamplingParams(1.0, generator=generator))
        counts[out.tokens[2]] += 1
        accepted += sum(out.accepted_per_call)
    assert accepted > 400, accepted
    statistic, p_value = chi_square(counts, expected)
    assert p_value > 1e-3, (statistic, p_value)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["eagle", "mtp"])
def test_shipped_heads_fixed_shape_chain_and_tree_on_the_embedded_model(kind: str) -> None:
    """The shipped heads on the embedded target, chain and EAGLE-2 tree: generate's tokens and the list-based
    loops' accepted counts (the same drafts and trees, step by step)."""
    target = load_model("tiny-qwen3")
    drafter = load_head(REPO / "models" / "heads" / kind, target)
    prompt = held_out_prompts(load_tokenizer("tiny-qwen3"), 1)[0]
    expected = generate(target, torch.tensor([prompt], device="cpu"), 48)[0].tolist()
    out = fixed_shape_speculative_generate(target, drafter, prompt, 48, k=4)
    reference = speculative_generate(target, drafter, prompt, 48, k=4)
    assert out.tokens == expected == reference.tokens
    assert out.accepted_per_call == reference.accepted_per_call
    assert out.tau > 2.0  # trained heads: well above the 1.0 of plain decoding
    tree = fixed_shape_dynamic_tree_generate(target, drafter, prompt, 48, depth=5, width=4, total_tokens=16)
    reference = dynamic_tree_speculative_generate(target, drafter, prompt, 48, depth=5, width=4, total_tokens=16)
    assert tree.tokens == expected and tree.accepted_per_call == reference.accepted_per_call


def test_captured_call_needs_cuda_for_a_graph() -> None:
    with pytest.raises(ValueError, match="CUDA"):
        CapturedCall(lambda x: x + 1, (torch.zeros(2, device="cpu"),), graph=True)
    call = CapturedCall(lambda x: x * 2, (torch.zeros(2, device="cpu"),), graph=False)
    assert call(torch.ones(2, device="cpu")).tolist() == [2.0, 2.0]


@contextmanager
def steps_must_not_sync(monkeypatch: pytest.MonkeyPatch):
    """Every CapturedCall (one decode or speculative step) runs with CUDA sync debugging set to raise."""
    original = CapturedCall.__call__

    def strict(self, *inputs):
        torch.cuda.set_sync_debug_mode("error")
        try:
            return original(self, *inputs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(CapturedCall, "__call__", strict)
    yield


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("kind", ["small model", "EAGLE", "EAGLE-3", "MTP"])
def test_cuda_graphs_give_the_eager_tokens_without_host_syncs(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    target = random_model(seed=0).to("cuda")
    drafter = make_drafter(kind, target)
    prompt = prompts(target.cfg.vocab_size, 1, length=10, seed=7)[0]
    ids = torch.tensor([prompt], device="cuda")
    expected = generate(target, ids, 24)
    with steps_must_not_sync(monkeypatch):
        assert torch.equal(fixed_shape_generate(target, ids, 24, graphs=True), expected)
        assert torch.equal(fixed_shape_generate(target, ids, 24, graphs=False), expected)
        for graphs in (True, False):
            out = fixed_shape_speculative_generate(target, drafter, prompt, 24, k=3, graphs=graphs)
            assert out.tokens == expected[0].tolist(), graphs
            if kind != "small model":
                tree = fixed_shape_dynamic_tree_generate(target, drafter, prompt, 24, depth=3, width=3,
                                                         total_tokens=8, graphs=graphs)
                assert tree.tokens == expected[0].tolist(), ("tree", graphs)
        sampling = SamplingParams(1.0, generator=torch.Generator("cuda").manual_seed(0))
        sampled = fixed_shape_speculative_generate(target, drafter, prompt, 24, k=3, sampling=sampling)
        served = FixedShapeChain(target, drafter, max_len=64, k=3, graphs=True)  # one graph, replayed across requests
        for other in prompts(target.cfg.vocab_size, 3, length=12, seed=9):
            assert served.generate(other, 24).tokens == generate(target, torch.tensor([other], device="cuda"), 24)[0].tolist()
    assert len(sampled.tokens) == 24


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_static_cache_refuses_a_bad_mask(device: str) -> None:
    cache = FixedShapeCache(random_model().cfg, 8, device=device)
    with pytest.raises(ValueError, match="bool"):
        cache.attention_mask(2, torch.ones(2, 3, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match="max_len"):
        cache.reserve(9)
