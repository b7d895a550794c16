"""Each shipped head in models/heads/ loads and reproduces the held-out acceptance its card records."""
import functools
import json

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec.drafters.head_io import load_head_module
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.analysis.train_heads import evaluate

from .conftest import REPO

HEADS = sorted(p.parent for p in (REPO / "models" / "heads").glob("*/config.json"))


@functools.cache
def held_out_greedy(n_prompts: int, new_tokens: int) -> tuple:
    """(embedded target, n held-out prompts, their plain greedy continuations): the same for every head."""
    target = load_model("tiny-qwen3")
    prompts = held_out_prompts(load_tokenizer("tiny-qwen3"), n_prompts, chars=400)
    expected = [generate(target, torch.tensor([p], device="cpu"), new_tokens)[0].tolist() for p in prompts]
    return target, prompts, expected


@pytest.mark.slow
@pytest.mark.xdist_group("shipped-heads")  # one worker computes held_out_greedy once for every head
@pytest.mark.parametrize("folder", HEADS, ids=lambda p: p.name)
def test_head_reproduces_its_recorded_held_out_acceptance(folder):
    recorded = json.loads((folder / "config.json").read_text())["held_out"]
    setup = json.loads((folder / "train_log.json").read_text())["eval"]
    target, prompts, expected = held_out_greedy(setup["prompts"], setup["new_tokens"])
    head = load_head_module(folder, target)
    got = evaluate(target, head, prompts, expected, setup["k"])  # also asserts greedy identity
    # Same greedy computation as at training time; another CPU's kernels can flip a near-tie argmax in
    # the head, moving a few of the ~60-120 draft decisions per position: allow 0.05 per position, 0.1 in tau.
    assert got["tau"] == pytest.approx(recorded["tau"], abs=0.1)
    for position, (a, b) in enumerate(zip(got["acceptance_per_position"], recorded["acceptance_per_position"])):
        assert a == pytest.approx(b, abs=0.05), f"position {position + 1}"


@pytest.mark.parametrize("folder", HEADS, ids=lambda p: p.name)
def test_card_names_both_acceptance_rates_from_the_log(folder):
    # the card is written from train_log.json: the per-position rate α and the acceptance ratio, each named
    final = json.loads((folder / "train_log.json").read_text())["evals"][-1]
    card = (folder / "README.md").read_text()
    assert "Per-position acceptance rate α" in card and f"α = {final['alpha']:.2f} pooled" in card
    assert "Acceptance ratio (accepted / proposed" in card and f"{final['acceptance_ratio']:.2f}." in card
    assert final["acceptance_ratio"] <= final["alpha"]  # a chain proposes every depth but reaches only some
    recorded = json.loads((folder / "config.json").read_text())["held_out"]
    assert recorded["acceptance_per_position"] == final["acceptance_per_position"] and recorded["tau"] == final["tau"]
