"""Every drafter the judge hands to a learner's function is a real `tree_spec.Drafter`: a learner function that uses
every documented member (tree_spec/drafters/base.py, the Proposer and LevelDrafter contracts) works on each, in
every case of exercises 11 and 15 and in the capstone's constructed inputs; a confident chain written with
`drafter.next_top(..., 1)` passes exercise 15."""
from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from practice.judgekit import capstone_rules, references
from practice.judgekit.catalog import discover, resolve
from practice.judgekit.drafters import ExactDrafter
from practice.judgekit.grading import cases_module
from practice.judgekit.settings import PRACTICE, Settings
from practice.judgekit.spec import Context
from practice.judgekit.worker import import_file
from tree_spec.core.contracts import Branching, DraftRequest, DraftTree, TargetFeatures
from tree_spec.drafters.base import Drafter

EXERCISES = discover(PRACTICE / "exercises")
SETTINGS = Settings()
ATTRIBUTES = ("vocab_size", "device", "calls", "feature_layers", "fixed_shape_twin")
METHODS = tuple(name for name, member in inspect.getmembers(Drafter, inspect.isfunction) if not name.startswith("_"))
NEXT_TOP_CHAIN = '''
import torch


def confident_chain(drafter, context, root, k, theta):
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        ids, logprobs = drafter.next_top(context, tokens, parents, [len(tokens) - 1], 1)
        token, p = int(ids[0, 0]), float(logprobs[0, 0].exp())
        parents.append(len(tokens) - 1)
        tokens.append(token)
        q *= p
        if q < theta:
            break
    return tokens, parents
'''


def use_every_member(drafter, context: list[int], root: int) -> None:
    """What a learner may call: every documented attribute and method of a Drafter, on a one-node tree."""
    assert isinstance(drafter, Drafter), type(drafter).__name__
    for name in ATTRIBUTES:
        getattr(drafter, name)
    assert set(METHODS) == {"reset", "observe", "observe_verify", "propose", "next_logits", "next_top"}
    tokens, parents = [root], [-1]
    logits = drafter.next_logits(context, tokens, parents, [0])
    assert logits.shape == (1, drafter.vocab_size)
    ids, logprobs = drafter.next_top(context, tokens, parents, [0], 2)
    assert ids.shape == logprobs.shape == (1, 2)
    drafter.observe_verify(tokens, parents, logits)
    if drafter.feature_layers is None:
        drafter.observe(TargetFeatures(torch.zeros(1, 1)))  # a no-op for drafters that read tokens only
    tree = drafter.propose(DraftRequest(list(context), root, Branching((1,)), 1))
    assert isinstance(tree, DraftTree) and tree.tokens[0] == root
    drafter.reset(64)


def model_needed() -> None:
    if not SETTINGS.model_path().is_dir():
        pytest.skip(f"model {SETTINGS.model_path()} missing")


@pytest.mark.parametrize("number", [11, 15])
def test_every_grader_drafter_implements_the_whole_drafter_interface(number: int) -> None:
    model_needed()
    ex = resolve(EXERCISES, str(number))
    cases, ctx = cases_module(ex), Context("cpu", SETTINGS.model_path())
    solution = import_file(ex.folder / "solution.py", f"solution_{number}")
    fn = cases.FUNCTIONS[0]
    seen = []

    def learner(drafter, context, root, *rest):
        use_every_member(drafter, context, root)
        seen.append(type(drafter).__name__)
        return getattr(solution, fn)(drafter, context, root, *rest)

    data = references.load_data(SETTINGS.references, ex.name)
    for case in cases.cases(ctx):
        out = cases.call(SimpleNamespace(**{fn: learner}), case, ctx)
        if isinstance(out, dict) and "calls" in out:  # the judge's count: one call per level or draft, whatever else
            out = {**out, "calls": data["expected"][case.name]["calls"]}  # the test itself made extra calls
        assert cases.check(out, data["expected"][case.name], case) is None, case.name
    assert set(seen) >= ({"ModelDrafter", "ExactDrafter"} if number == 15 else {"ModelDrafter"})


def test_the_capstones_constructed_drafters_are_drafters() -> None:
    model_needed()
    from mini_llm import load_model
    from tree_spec import ModelDrafter

    small = ModelDrafter(load_model(PRACTICE.parent / "models" / "tiny-qwen3-draft"))
    for walk in capstone_rules.walks(small, [5, 6, 7, 8]):
        if walk.key in ("11", "15"):
            drafter, context, root = walk.args()[:3]
            use_every_member(drafter, context, root)
    use_every_member(ExactDrafter(), [1, 2, 3], 7)


def test_a_confident_chain_that_calls_next_top_passes(tmp_path: Path) -> None:
    model_needed()
    ex = resolve(EXERCISES, "15")
    path = tmp_path / "next_top_chain.py"
    path.write_text(NEXT_TOP_CHAIN)
    cases, ctx = cases_module(ex), Context("cpu", SETTINGS.model_path())
    module = import_file(path, "next_top_chain")
    data = references.load_data(SETTINGS.references, ex.name)
    for case in cases.cases(ctx):
        out = cases.call(SimpleNamespace(confident_chain=module.confident_chain), case, ctx)
        assert cases.check(out, data["expected"][case.name], case) is None, case.name
