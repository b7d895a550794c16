"""No hidden default-device tensors: models on the CPU while torch's default device is "meta".

Every tensor the library creates must name its device: the model's, or the CPU for host-side work (prompts,
tree bookkeeping, simulations). One that does not follows torch's default device; on a GPU machine that is a
CPU tensor beside CUDA weights (a device error, or a silent host copy), or a CUDA tensor beside CPU ones when
a learner calls `torch.set_default_device("cuda")`. On this CPU-only machine "meta" stands in for the other
device: a meta tensor holds no data, so reading one (`.tolist()`, `int()`, mixing with a CPU tensor) fails,
and every such call in these paths is found without a GPU: every drafter and loop, fixed shapes, verifiers,
head training, and the two benchmark harnesses that scripts/gpu_check.sh runs on CUDA. Each run must also give
what it gives without the default device set: greedy identity with `generate`, the same sampled tokens for the
same seed.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from mini_llm import Transformer, generate, generate_batch, load_model
from mini_llm.graphs import fixed_shape_generate
from tree_spec import SamplingParams
from tree_spec import (
    LookaheadDrafter, NGramDrafter, batch_speculative_generate, dynamic_tree_speculative_generate, lookahead_generate, speculative_generate, tree_speculative_generate,
)
from tree_spec.analysis.curve import ForwardTimer
from tree_spec.drafters.head_io import load_head
from tree_spec.analysis.stats import paired_distributions
from tree_spec.core.sampling import verify_chain, verify_tree
from tree_spec.analysis.stats import chi_square
from tree_spec.analysis.speedup import simulate_tail
from tree_spec.fixed_shape.chain import fixed_shape_speculative_generate
from tree_spec.fixed_shape.tree import fixed_shape_dynamic_tree_generate
from tests.spec_models import checkpoint_with_tokenizer, prompts, random_model
from tests.test_bench import folders  # noqa: F401 (a fixture)
from tests.test_devices import DRAFTERS, DYNAMIC, NEW, TREE, make_drafter

FIXED_SHAPE_CHAIN = {"small model", "INT4 self", "EAGLE", "EAGLE draft_vocab", "EAGLE-3", "MTP"}
FIXED_SHAPE_TREE = {"EAGLE", "EAGLE draft_vocab", "EAGLE-3", "MTP"}  # recurrent heads


def meta_default(run: Callable[[], object]) -> object:
    """run() with torch's default device set to meta (models and generators stay on the CPU)."""
    with torch.device("meta"):
        return run()


@pytest.fixture(scope="module")
def target() -> Transformer:
    return random_model(seed=0)


@pytest.mark.parametrize("kind", DRAFTERS)
def test_every_drafter_and_loop_names_its_devices(target: Transformer, kind: str) -> None:
    drafter = make_drafter(kind, target)
    runs: dict[str, Callable[[list[int]], list[int]]] = {
        "chain": lambda p: speculative_generate(target, drafter, p, NEW, k=3).tokens,
        "static tree": lambda p: tree_speculative_generate(target, drafter, p, NEW, branching=TREE).tokens,
        "dynamic tree": lambda p: dynamic_tree_speculative_generate(target, drafter, p, NEW, **DYNAMIC).tokens,
    }
    if kind in FIXED_SHAPE_CHAIN:
        runs["fixed-shape chain"] = lambda p: fixed_shape_speculative_generate(target, drafter, p, NEW, k=3).tokens
    if kind in FIXED_SHAPE_TREE:
        runs["fixed-shape dynamic tree"] = lambda p: fixed_shape_dynamic_tree_generate(target, drafter, p, NEW,
                                                                                       **DYNAMIC).tokens
    prompt = prompts(target.cfg.vocab_size, 1, length=10, seed=3)[0]

    def seeded(seed: int) -> torch.Generator:
        return torch.Generator().manual_seed(seed)

    sampled = {
        "sampled tree": lambda s: tree_speculative_generate(target, drafter, prompt, NEW, branching=TREE,
                                                            sampling=SamplingParams(1.0, generator=seeded(s))).tokens,
        "sampled dynamic tree": lambda s: dynamic_tree_speculative_generate(
            target, drafter, prompt, NEW, **DYNAMIC, sampling=SamplingParams(1.0, generator=seeded(s))).tokens,
    }
    for greedy_prompt in prompts(target.cfg.vocab_size, 2, length=10, seed=7):
        expected = generate(target, torch.tensor([greedy_prompt], device="cpu"), NEW)[0].tolist()
        for form, run in runs.items():
            assert meta_default(lambda: run(greedy_prompt)) == expected, form
    for form, run in sampled.items():
        assert meta_default(lambda: run(5)) == run(5), form


def test_plain_batched_lookahead_and_fixed_shape_decoding(target: Transformer) -> None:
    rows = prompts(target.cfg.vocab_size, 3, length=6, seed=2)
    expected = [generate(target, torch.tensor([row], device="cpu"), NEW)[0].tolist() for row in rows]
    ngram = NGramDrafter(target.cfg.vocab_size, device="cpu")
    lookahead = LookaheadDrafter(target.cfg.vocab_size, device="cpu")
    assert meta_default(lambda: [generate(target, row, NEW)[0].tolist() for row in rows]) == expected  # list prompts
    assert meta_default(lambda: generate_batch(target, rows, NEW)) == expected
    assert meta_default(lambda: [fixed_shape_generate(target, row, NEW)[0].tolist() for row in rows]) == expected
    assert meta_default(lambda: [lookahead_generate(target, r, NEW, drafter=lookahead).tokens for r in rows]) \
        == expected
    assert meta_default(lambda: [o.tokens for o in batch_speculative_generate(target, ngram, rows, NEW, k=3)]) \
        == expected

    def sampled() -> tuple[list[int], list[int]]:
        return (generate(target, rows[0], NEW, temperature=1.0, generator=torch.Generator().manual_seed(3))[0].tolist(),
                speculative_generate(target, ngram, rows[0], NEW, k=3,
                                     sampling=SamplingParams(1.0, generator=torch.Generator().manual_seed(3))).tokens)
    assert meta_default(sampled) == sampled()


def test_verifiers_simulations_and_cost_curves_work_on_the_host() -> None:
    def host_side() -> tuple:
        g = torch.Generator().manual_seed(0)
        target_probs, draft_probs = paired_distributions(16, 0.6, (4,), generator=g)
        chain = verify_chain(torch.multinomial(draft_probs[:3], 1, generator=g)[:, 0], draft_probs[:3],
                             target_probs, g)
        parents = [-1, 0, 0, 1]
        tokens = [0, *torch.multinomial(draft_probs[0], 2, generator=g).tolist(), 5]
        tree = verify_tree(tokens, parents, draft_probs, target_probs, g)
        tail = simulate_tail(0.7, 3, 0.2, n_tokens=200)
        return (target_probs.tolist(), chain, tree, tail.spec_itl.tolist(), tail.spec_p99,
                chi_square([10, 20, 30], [15.0, 15.0, 30.0]))

    assert meta_default(host_side) == host_side()
    timer = meta_default(lambda: ForwardTimer(random_model(seed=1), [1, 2], context=8))
    meta_default(lambda: timer.sample(1))
    assert all(len(times) == 1 for times in timer.times.values())


def test_head_training_and_loading(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tree_spec.analysis.train_heads import main

    target_dir = checkpoint_with_tokenizer(tmp_path_factory.mktemp("target"), std=0.3)
    for kind in ("eagle3", "medusa"):
        out = tmp_path_factory.mktemp(kind)
        log = meta_default(lambda: main(["--kind", kind, "--target", str(target_dir), "--out", str(out), "--steps", "2",
                                         "--windows", "8", "--batch", "8", "--prompt-len", "24", "--gen-len", "24",
                                         "--eval-prompts", "2", "--eval-tokens", "12"]))
        assert len(log["losses"]) == 2 and all(torch.isfinite(torch.tensor(s["loss"], device="cpu"))
                                               for s in log["losses"])
        drafter = meta_default(lambda: load_head(out, load_model(target_dir)))
        assert next(drafter.head.parameters()).device.type == "cpu"


def test_benchmark_harness(folders) -> None:  # noqa: F811
    """`python -m tree_spec.tools.bench --quick` greedy (every method but transformers') and the fixed-shape bench."""
    from tree_spec.tools import bench, graph_bench

    root, target = folders
    result = meta_default(lambda: bench.main([
        "--target", str(target), "--draft", str(root / "draft"), "--heads", str(root / "heads"),
        "--tuned", str(root / "tuned"), "--quick", "--no-transformers", "--out", str(root / "out-meta-default")]))
    assert result["device"].startswith("cpu") and all(r["identical"] == result["prompts"] for r in result["rows"])
    graphs = meta_default(lambda: graph_bench.main(["--target", str(target), "--draft", str(root / "draft"),
                                                    "--heads", str(root / "heads"), "--quick",
                                                    "--out", str(root / "graphs-meta-default")]))
    assert graphs["rows"] and all(r["identical"] == r["prompts"] for r in graphs["rows"])
