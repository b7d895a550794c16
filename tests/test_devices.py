"""Every device path, on the CPU and (skipped without one) on a CUDA GPU: `device` runs each test once per device.

Per device, on small random models: every drafter (n-gram, lookahead, small model, INT4 quantized self,
Medusa, EAGLE-1 with and without a reduced draft vocabulary, EAGLE-3 style, MTP) through the chain, the
static tree and the EAGLE-2 dynamic tree gives `generate`'s greedy tokens; sampled tree decoding runs with a
generator on the device; batched rows equal `generate`; head training and the judge's record / grade take
`--device`. Every logits tensor a drafter hands the loops must already live on the device (the loops would
otherwise move it silently). The CPU run proves each test's logic on a machine without a GPU.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from mini_llm import Transformer, generate, generate_batch, load_model
from tree_spec import SamplingParams
from tree_spec.drafters.features import HeadDrafter, MedusaDrafter
from tree_spec import (
    LookaheadDrafter, ModelDrafter, NGramDrafter, QuantizedSelfDrafter, batch_speculative_generate, build_draft_tree, build_dynamic_tree, dynamic_tree_speculative_generate, lookahead_generate, speculative_generate, tree_speculative_generate,
)
from tree_spec.drafters.base import Drafter
from tree_spec.drafters.heads import make_head
from tests.judge_support import judge, judge_env
from tests.spec_models import checkpoint_with_tokenizer, perturbed_copy, prompts, random_model

CUDA = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")]
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]
DRAFTERS = ["n-gram", "small model", "INT4 self", "Medusa", "EAGLE", "EAGLE draft_vocab", "EAGLE-3", "MTP"]
NEW = 16
TREE = [2, 2, 1]
DYNAMIC = dict(depth=3, width=3, total_tokens=8)


@pytest.fixture(scope="module", params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def target(device: str) -> Transformer:
    return random_model(seed=0).to(device)


def make_drafter(kind: str, target: Transformer) -> Drafter:
    """A fresh, untrained drafter of `kind` on the target's device (greedy identity holds for any draft)."""
    torch.manual_seed(0)
    device, vocab = target.device, target.cfg.vocab_size
    if kind == "n-gram":
        return NGramDrafter(vocab, device=device)
    if kind == "small model":
        return ModelDrafter(perturbed_copy(target).to(device))
    if kind == "INT4 self":
        return QuantizedSelfDrafter(target)
    if kind == "Medusa":
        with torch.device("cpu"):
            head = make_head("medusa", target.cfg)
        with torch.no_grad():
            for block in head.blocks:
                block.weight.normal_(0, 0.3)  # untrained Medusa blocks start at zero: make them propose something
        return MedusaDrafter(target, head)
    head_kind = {"EAGLE": "eagle", "EAGLE draft_vocab": "eagle", "EAGLE-3": "eagle3", "MTP": "mtp"}[kind]
    draft_vocab = torch.arange(0, vocab, 2, device="cpu") if kind == "EAGLE draft_vocab" else None  # every other id
    with torch.device("cpu"):
        head = make_head(head_kind, target.cfg)
    return HeadDrafter(target, head, draft_vocab)


@contextmanager
def logits_devices(drafter: Drafter) -> Iterator[list[torch.device]]:
    """Inside the block, the device of every tensor the drafter's level calls return (`next_logits`: logits [n, V];
    `next_top`, which greedy growth asks: ids and log-probabilities [n, w]) is appended to the list."""
    seen: list[torch.device] = []

    def recording(original: Callable) -> Callable:
        def recorded(*args, **kwargs):
            out = original(*args, **kwargs)
            seen.extend(t.device for t in (out if isinstance(out, tuple) else (out,)))
            return out
        return recorded

    drafter.next_logits, drafter.next_top = recording(drafter.next_logits), recording(drafter.next_top)
    try:
        yield seen
    finally:
        del drafter.next_logits, drafter.next_top


def on(device: str, seen: list[torch.device]) -> bool:
    """Every recorded device is `device` (and there was at least one)."""
    return bool(seen) and all(d.type == device for d in seen)


def plain(target: Transformer, prompt: list[int], **kwargs) -> list[int]:
    """`generate`'s new tokens for one prompt, checked to come back on the target's device."""
    out = generate(target, torch.tensor([prompt], device="cpu"), NEW, **kwargs)
    assert out.device == target.device and out.shape == (1, NEW)
    return out[0].tolist()


@pytest.mark.parametrize("kind", DRAFTERS)
def test_greedy_identity_chain_static_and_dynamic_tree(device: str, target: Transformer, kind: str) -> None:
    drafter = make_drafter(kind, target)
    runs: dict[str, Callable[[list[int]], list[int]]] = {
        "chain": lambda p: speculative_generate(target, drafter, p, NEW, k=3).tokens,
        "static tree": lambda p: tree_speculative_generate(target, drafter, p, NEW, branching=TREE).tokens,
        "dynamic tree": lambda p: dynamic_tree_speculative_generate(target, drafter, p, NEW, **DYNAMIC).tokens,
    }
    for prompt in prompts(target.cfg.vocab_size, 2, length=10, seed=7):
        expected = plain(target, prompt)
        for form, run in runs.items():
            with logits_devices(drafter) as seen:
                assert run(prompt) == expected, form
            assert on(device, seen), f"{form}: drafter logits on {set(seen)}"


def test_lookahead_greedy_identity(device: str, target: Transformer) -> None:
    drafter = LookaheadDrafter(target.cfg.vocab_size, device=device)
    assert drafter.device.type == device
    for prompt in prompts(target.cfg.vocab_size, 2, length=10, seed=7):
        out = lookahead_generate(target, prompt, NEW, drafter=drafter)
        assert out.tokens == plain(target, prompt) and out.proposed > 0


@pytest.mark.parametrize("kind", DRAFTERS)
def test_sampled_tree_decoding_runs_and_is_seeded(device: str, target: Transformer, kind: str) -> None:
    """Temperature 1.0 with a generator on the device: static and dynamic trees return NEW in-vocabulary tokens,
    the same ones for the same seed; the sampled draft trees keep their draft_probs [n, V] on the device."""
    drafter = make_drafter(kind, target)
    prompt = prompts(target.cfg.vocab_size, 1, length=10, seed=3)[0]

    def gen(seed: int) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(seed)

    runs: dict[str, Callable[[int], list[int]]] = {
        "static tree": lambda s: tree_speculative_generate(target, drafter, prompt, NEW, branching=TREE,
                                                           sampling=SamplingParams(1.0, generator=gen(s))).tokens,
        "dynamic tree": lambda s: dynamic_tree_speculative_generate(
            target, drafter, prompt, NEW, **DYNAMIC, sampling=SamplingParams(1.0, generator=gen(s))).tokens,
    }
    for form, run in runs.items():
        with logits_devices(drafter) as seen:
            a, b = run(5), run(5)
        assert a == b and len(a) == NEW and all(0 <= t < target.cfg.vocab_size for t in a), form
        assert on(device, seen), f"{form}: drafter logits on {set(seen)}"
    assert len(plain(target, prompt, temperature=1.0, generator=gen(5))) == NEW
    if drafter.feature_layers is None:  # a feature drafter needs the loop's observe() calls before drafting
        drafter.reset(64)
        for tree in (build_draft_tree(drafter, prompt, 1, TREE, sampling=SamplingParams(1.0, generator=gen(0))),
                     build_dynamic_tree(drafter, prompt, 1, **DYNAMIC, sampling=SamplingParams(1.0, generator=gen(0)))):
            assert tree.draft_probs.device.type == device


def test_batched_rows_equal_generate(device: str, target: Transformer) -> None:
    """Prompts of lengths 3, 7, 11: `generate_batch` and batched chain speculation (small model, INT4 self,
    n-gram) give each row `generate`'s tokens."""
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(0, target.cfg.vocab_size, (3 + 4 * i,), generator=g, device="cpu").tolist() for i in range(3)]
    expected = [plain(target, row) for row in rows]
    assert generate_batch(target, rows, NEW) == expected
    for kind in ("small model", "INT4 self", "n-gram"):
        outs = batch_speculative_generate(target, make_drafter(kind, target), rows, NEW, k=3)
        assert [o.tokens for o in outs] == expected, kind


def test_head_trains_on_the_device(device: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`python -m tree_spec.analysis.train_heads --device`: a few steps on a random target, the head written and loadable."""
    from tree_spec.drafters.head_io import load_head
    from tree_spec.analysis.train_heads import main

    target_dir = checkpoint_with_tokenizer(tmp_path_factory.mktemp("target"), std=0.3)
    for kind in ("eagle3", "medusa"):
        out = tmp_path_factory.mktemp(kind)
        log = main(["--kind", kind, "--target", str(target_dir), "--out", str(out), "--steps", "4",
                    "--windows", "8", "--batch", "8", "--prompt-len", "24", "--gen-len", "24", "--eval-prompts", "2",
                    "--eval-tokens", "12", "--device", device])
        assert len(log["losses"]) == 4 and all(torch.isfinite(torch.tensor(s["loss"], device="cpu"))
                                               for s in log["losses"])
        drafter = load_head(out, load_model(target_dir, device=device))
        assert next(drafter.head.parameters()).device.type == device


# ------------------------------------------------------------------ the judge: record and grade on the device
EXERCISE, WRONG = "10-tree-forward", "no_mask.py"  # runs the real model: the device matters


@pytest.fixture(scope="module")
def judge_setup(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return judge_env(tmp_path_factory, "judge-devices")


def test_judge_records_and_grades_on_the_device(device: str, judge_setup: dict, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`judge.py record --device D` writes a reference that names D; the solution passes and a wrong file fails
    against it when graded on D and on the CPU (a learner without a GPU grading against GPU references)."""
    from practice.judgekit.settings import PRACTICE

    refs = tmp_path / "references"
    shutil.copytree(judge_setup["root"] / "references", refs)
    opts = ["--references", str(refs), "--model", str(judge_setup["root"] / "model"),
            "--workspace", str(tmp_path / "workspace")]
    code, out = judge(*opts, "record", "--device", device, EXERCISE)
    assert code == 0, out
    assert json.loads((refs / f"{EXERCISE}.json").read_text())["device"] == device
    folder = PRACTICE / "exercises" / EXERCISE
    for graded_on in dict.fromkeys([device, "cpu"]):
        monkeypatch.setenv("SPEC_JUDGE_DEVICE", graded_on)
        code, out = judge(*opts, "test", EXERCISE, str(folder / "solution.py"))
        assert code == 0 and f"({graded_on})" in out, out
        code, out = judge(*opts, "test", EXERCISE, str(folder / "wrong" / WRONG))
        assert code == 1, out
