"""Batched decoding over prompts of different lengths: greedy rows equal single-sequence `generate`, sampled
rows follow the target's distribution (chi-square, with a biased verifier as the negative control)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from mini_llm import Config, Transformer, generate, generate_batch
from tree_spec import batch_speculative_generate, NGramDrafter, QuantizedSelfDrafter, SamplingParams, speculative_generate
from tree_spec.core import sampling
from tree_spec.analysis import batch_sweep as batch_module
from tree_spec.analysis.batch_sweep import batch_sweep, batch_sweeps, batch_table, crossover
from tree_spec.analysis.stats import chi_square

from .spec_models import perturbed_copy, random_model

P_PASS, P_REJECT = 1e-3, 1e-6  # the project's one threshold (tests/test_sampling.py); the bias is large
NEW = 24


@pytest.fixture(scope="module")
def target() -> Transformer:
    return random_model(0)


def batch_of(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """n prompts of different lengths (3, 7, 11, ...)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (3 + 4 * i,), generator=g, device="cpu").tolist() for i in range(n)]


def plain(target: Transformer, prompts: list[list[int]], eos: int | None = None) -> list[list[int]]:
    return [generate(target, torch.tensor([p], device="cpu"), NEW, eos_token_id=eos)[0].tolist() for p in prompts]


def eos_with_different_stops(target: Transformer, prompts: list[list[int]]) -> int:
    """A token that ends a single row early; for a batch, one that ends rows at two or more different
    steps and leaves at least one row running to the budget."""
    refs = plain(target, prompts)
    for token in [t for r in refs for t in r[2:]]:
        stops = {r.index(token) if token in r else NEW for r in refs}
        if len(prompts) == 1 or (len(stops) >= 3 and NEW in stops):
            return token
    raise AssertionError("no token gives different EOS points")


@pytest.mark.parametrize("batch", [1, 3, 8])
def test_generate_batch_greedy_equals_generate(target: Transformer, batch: int) -> None:
    prompts = batch_of(batch, target.cfg.vocab_size)
    assert generate_batch(target, prompts, NEW) == plain(target, prompts)
    eos = eos_with_different_stops(target, prompts)
    got = generate_batch(target, prompts, NEW, eos_token_id=eos)
    assert got == plain(target, prompts, eos)
    if batch > 1:
        assert len({len(r) for r in got}) > 1, "rows must end at different steps"


@pytest.mark.parametrize("batch", [1, 3, 8])
@pytest.mark.parametrize("kind", ["small model", "INT4 self", "n-gram"])
def test_batch_speculative_greedy_equals_generate(target: Transformer, batch: int, kind: str) -> None:
    drafter = {"small model": lambda: perturbed_copy(target, 0.05), "INT4 self": lambda: QuantizedSelfDrafter(target),
               "n-gram": lambda: NGramDrafter(target.cfg.vocab_size)}[kind]()
    prompts = batch_of(batch, target.cfg.vocab_size, seed=batch)
    outs = batch_speculative_generate(target, drafter, prompts, NEW, k=3)
    assert [o.tokens for o in outs] == plain(target, prompts)
    for out, prompt in zip(outs, prompts):
        alone = speculative_generate(target, drafter, prompt, NEW, k=3)
        # the same drafts and per-row acceptance as the single-sequence loop, so the same verify passes
        assert out.accepted_per_call == alone.accepted_per_call and out.target_calls == alone.target_calls
        assert abs(out.tau - len(out.tokens) / out.target_calls) < 1e-12
    eos = eos_with_different_stops(target, prompts)
    outs = batch_speculative_generate(target, drafter, prompts, NEW, k=3, eos_token_id=eos)
    assert [o.tokens for o in outs] == plain(target, prompts, eos)


def test_rows_that_finish_early_leave_the_batch(target: Transformer) -> None:
    prompts = batch_of(4, target.cfg.vocab_size, seed=7)
    eos = eos_with_different_stops(target, prompts)
    outs = batch_speculative_generate(target, perturbed_copy(target, 0.05), prompts, NEW, k=3, eos_token_id=eos)
    lengths = [len(o.tokens) for o in outs]
    assert min(lengths) < NEW == max(lengths)
    short, long = outs[lengths.index(min(lengths))], outs[lengths.index(NEW)]
    assert short.target_calls < long.target_calls, "a finished row takes no further verify passes"


def test_bad_batches_are_rejected(target: Transformer) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        generate_batch(target, [], 4)
    with pytest.raises(ValueError, match=r"prompts\[1\]: the prompt is empty"):
        batch_speculative_generate(target, target, [[1, 2], []], 4)
    with pytest.raises(ValueError, match="vocabulary"):
        batch_speculative_generate(target, random_model(1, vocab_size=50), [[1, 2]], 4)
    with pytest.raises(ValueError, match="k must be"):
        batch_speculative_generate(target, target, [[1, 2]], 4, k=0)
    assert generate_batch(target, [[1], [2, 3]], 0) == [[], []]
    with pytest.raises(ValueError, match=r"prompts\[0\] is 1, not a token list"):
        batch_speculative_generate(target, target, [1, 2, 3], 4)  # one prompt, not wrapped in a list
    with pytest.raises(ValueError, match=r"prompts\[1\]: prompt token .* outside the model's vocabulary"):
        generate_batch(target, [[1], [2, target.cfg.vocab_size]], 4)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        generate_batch(target, [[1]], target.cfg.max_position_embeddings)
    with pytest.raises(ValueError, match="eos_token_id"):
        generate_batch(target, [[1]], 2, eos_token_id=-1)
    with pytest.raises(TypeError, match="sampling must be a SamplingParams"):
        batch_speculative_generate(target, target, [[1, 2]], 4, sampling=1.0)


# ------------------------------------------------------------------ sampling: lossless per row
VOCAB, REPEATS = 6, 2500  # 6^3 = 216 joint bins of the first 3 tokens, 2500 samples per prompt


def small_vocab_pair() -> tuple[Transformer, Transformer]:
    """A random target over 6 tokens with spread-out logits and a draft that often disagrees with it."""
    cfg = Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16, max_position_embeddings=64)
    g = torch.Generator().manual_seed(3)
    with torch.device("cpu"):
        target = Transformer(cfg).eval()
    with torch.no_grad():
        for name, p in target.named_parameters():
            p.copy_(torch.ones_like(p) if "norm" in name else torch.randn(p.shape, generator=g, device="cpu") * 0.3)
    return target, perturbed_copy(target, noise=0.3, seed=4)


@torch.inference_mode()
def joint_law(target: Transformer, prompt: list[int]) -> torch.Tensor:
    """P(t1, t2, t3 | prompt) at temperature 1 -> [V, V, V], from the target alone."""
    V = VOCAB
    p1 = torch.softmax(target(torch.tensor([prompt], device="cpu"))[0, -1], -1)            # [V]
    two = torch.tensor([prompt + [a] for a in range(V)], device="cpu")
    p2 = torch.softmax(target(two)[:, -1], -1)                                              # [V, V]
    three = torch.tensor([prompt + [a, b] for a in range(V) for b in range(V)], device="cpu")
    p3 = torch.softmax(target(three)[:, -1], -1).view(V, V, V)
    return p1[:, None, None] * p2[:, :, None] * p3


def per_row_p_values(seed: int) -> list[float]:
    """One batch: 3 prompts of different lengths, each repeated REPEATS times (independent rows);
    4 new tokens with k = 3, so the first verify pass has 2 drafts plus the bonus row. Returns one
    chi-square p-value per prompt for the joint law of its rows' first 3 tokens."""
    target, draft = small_vocab_pair()
    prompts = [[1, 2], [3, 0, 5, 4, 2], [5, 5, 1, 0, 3, 2, 4, 1]]
    batch = [p for p in prompts for _ in range(REPEATS)]
    outs = batch_speculative_generate(target, draft, batch, 4, k=3,
                                      sampling=SamplingParams(1.0, generator=torch.Generator().manual_seed(seed)))
    assert sum(o.proposed for o in outs) > 0 and 0 < sum(sum(o.accepted_per_call) for o in outs)
    p_values = []
    for i, prompt in enumerate(prompts):
        counts = torch.zeros(VOCAB ** 3, device="cpu")
        for out in outs[i * REPEATS:(i + 1) * REPEATS]:
            t1, t2, t3 = out.tokens[:3]
            counts[(t1 * VOCAB + t2) * VOCAB + t3] += 1
        p_values.append(chi_square(counts, joint_law(target, prompt).flatten())[1])
    return p_values


def test_batch_sampling_is_lossless_per_row() -> None:
    p_values = per_row_p_values(seed=0)
    assert min(p_values) > P_PASS, p_values


def test_biased_batch_sampler_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: resampling from target_probs instead of the residual after a rejection."""
    monkeypatch.setattr(sampling, "residual", lambda target_probs, draft_probs: target_probs)
    p_values = per_row_p_values(seed=0)
    assert max(p_values) < P_REJECT, p_values


def test_batch_sweep_counts_every_token_and_finds_where_it_stays_below_one(target: Transformer) -> None:
    prompts = batch_of(3, target.cfg.vocab_size, seed=11)
    points = batch_sweep(target, NGramDrafter(target.cfg.vocab_size), prompts, (1, 4), 6, k=2)
    assert [p.batch for p in points] == [1, 4]
    assert [p.rows for p in points] == [3, 4]  # every B decodes all 3 prompts (cycled to fill B = 4)
    assert all(p.identical and p.plain_tokens == p.spec_tokens == 6 * p.rows for p in points)
    assert all(p.plain_seconds > 0 and p.spec_seconds > 0 and p.target_calls >= p.batch for p in points)
    fake = [replace(points[0], batch=b, spec_seconds=points[0].plain_seconds * f, spec_ms_rounds=(), plain_ms_rounds=())
            for b, f in ((1, 0.5), (2, 1.25), (4, 0.9))]
    assert [round(p.speedup, 6) for p in fake] == [2.0, 0.8, round(1 / 0.9, 6)]
    assert crossover(fake[:2]) == 2 and crossover(fake[:1]) is None
    assert crossover(fake) is None  # below 1x at B = 2, above at B = 4: a dip, not a crossover
    assert crossover(fake + [replace(fake[1], batch=8), replace(fake[1], batch=16)]) == 8
    assert "| n-gram | 2 |" in batch_table({"n-gram": fake})
    plain_ms = 1000 * fake[1].plain_seconds  # rounds: plain 1.0x and 1.5x its kept time, speculation 1.25x
    overlapping = replace(fake[1], plain_ms_rounds=(plain_ms, 1.5 * plain_ms), spec_ms_rounds=(1.25 * plain_ms,))
    assert overlapping.speedup < 1 and not overlapping.slower_beyond_noise  # slower in the kept runs, not beyond noise
    assert crossover([fake[0], overlapping]) is None and crossover(fake[:2]) == 2


@pytest.mark.parametrize("falling", [True, False], ids=["later-rounds-faster", "earlier-rounds-faster"])
def test_batch_sweeps_share_the_plain_run_split_the_time_and_keep_the_fastest_round(target, monkeypatch, falling) -> None:
    prompts, real_split = batch_of(2, target.cfg.vocab_size, seed=5), batch_module.time_split
    totals = iter(range(100, 0, -1) if falling else range(1, 101))

    def scripted(run, model):  # the real split, its total replaced by the next scripted one
        result, split = real_split(run, model)
        return result, replace(split, total_ms=float(next(totals)))

    monkeypatch.setattr(batch_module, "time_split", scripted)
    drafters = {"n-gram": NGramDrafter(target.cfg.vocab_size), "self": perturbed_copy(target)}
    runs = batch_sweeps(target, drafters, prompts, (1, 2), 5, k=2, repeats=2)
    # one call per batch: B = 1 runs each on 2 batches, then B = 2 on one; round 1 (calls 0-8) in the order plain,
    # n-gram, self, round 2 (calls 9-17) rotated to n-gram, self, plain; each run keeps its faster round
    if falling:
        plain, ngram, self_ = [87 + 86, 83], [91 + 90, 85], [89 + 88, 84]
    else:
        plain, ngram, self_ = [1 + 2, 7], [3 + 4, 8], [5 + 6, 9]
    assert [p.plain_time.total_ms for p in runs["n-gram"]] == [p.plain_time.total_ms for p in runs["self"]] == plain
    assert [p.spec_time.total_ms for p in runs["n-gram"]] == ngram and [p.spec_time.total_ms for p in runs["self"]] == self_
    for p in runs["n-gram"] + runs["self"]:
        assert p.plain_seconds == p.plain_time.total_ms / 1000 and p.spec_seconds == p.spec_time.total_ms / 1000
        assert p.identical and p.plain_time.draft_ms == 0 < p.spec_time.draft_ms
        batches = 2 // p.batch                   # one prefill per batch, plain and speculative
        assert sum(p.plain_time.prefill_sizes.values()) == batches == sum(p.spec_time.prefill_sizes.values())
        assert p.plain_time.forwards == batches * (5 - 1) and set(p.plain_time.forward_sizes) == {1}
        assert set(p.spec_time.forward_sizes) <= {1, 2, 3}        # a verify pass: the root + up to k = 2 drafts
        passes = p.target_calls - p.rows        # verify passes summed over rows; a batch's pass serves all its rows
        assert p.spec_time.forwards == passes if p.batch == 1 else passes / 2 <= p.spec_time.forwards <= passes
    saved = json.loads(json.dumps(p.spec_time.to_dict()))                # what `bench --batch` returns, per point
    assert saved["forward_sizes"] == {str(n): c for n, c in p.spec_time.forward_sizes.items()}
    assert saved["rest_ms"] == pytest.approx(p.spec_time.rest_ms) and len(saved["draft_calls"]) == len(p.spec_time.draft_calls)


def test_a_token_level_proposer_that_returns_a_branching_tree_is_refused_by_name(target: Transformer) -> None:
    from tree_spec import DraftTree, Drafter

    class Branchy(Drafter):  # proposes two siblings where the batched loop asked for a chain
        def __init__(self):
            super().__init__(target.cfg.vocab_size, "cpu")

        def reset(self, max_len):
            pass

        def propose(self, request):
            return DraftTree([request.root, 1, 2], [-1, 0, 0])

        def next_logits(self, context, tokens, parents, frontier):
            raise AssertionError("never called: propose is overridden")

    with pytest.raises(ValueError, match="Branchy.* not a chain"):
        batch_speculative_generate(target, Branchy(), [[1, 2, 3]], 8, k=2)
