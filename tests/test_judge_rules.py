"""Every exercise's rules are graded, in-process (no worker): each README rule names the cases that see it,
each modelled mistake is named exactly when a learner makes it, the sampling mistakes move the law by
>= 0.05, inputs are checked after every call, and the judge's counters survive honest code that touches
the drafter's own counter or the model's hooks.
"""
import math
from types import SimpleNamespace

import pytest
import torch

from practice.judgekit import references
from practice.judgekit.catalog import discover, resolve
from practice.judgekit.grading import cases_module, diagnose
from practice.judgekit.guard import change, guarded, snapshot
from practice.judgekit.rejection import outcome_law, verify
from practice.judgekit.settings import PRACTICE, Settings
from practice.judgekit.spec import Context

EXERCISES = discover(PRACTICE / "exercises")
SETTINGS = Settings()
TV_MIN = 0.05  # each known mistake must move the law at least this far (total variation)


def context() -> Context:
    return Context("cpu", SETTINGS.model_path())


def needs_model(ex) -> None:
    if ex.needs_model and not SETTINGS.model_path().is_dir():
        pytest.skip(f"model {SETTINGS.model_path()} missing")


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_every_rule_lists_existing_cases_and_case_names_are_unique(ex):
    cases = cases_module(ex)
    names = [case.name for case in cases.cases(context())]
    assert len(names) == len(set(names)), f"{ex.name}: repeated case names"
    assert cases.RULES, f"{ex.name}: cases.py needs RULES (README rule -> cases)"
    for rule, listed in cases.RULES.items():
        assert listed, f"{ex.name}: rule {rule!r} lists no case"
        missing = [name for name in listed if name not in names]
        assert not missing, f"{ex.name}: rule {rule!r} lists unknown cases {missing}"
    for mistake in cases.MISTAKES:
        assert mistake.rule in cases.RULES, f"{ex.name}: {mistake.message[:50]!r} names no README rule (with_rules)"


def solution_and_data(ex):
    from practice.judgekit.worker import import_file

    cases = cases_module(ex)
    module = import_file(ex.folder / "solution.py", f"solution_{ex.number}")
    data = references.load_data(SETTINGS.references, ex.name)
    return cases, SimpleNamespace(**{n: getattr(module, n) for n in cases.FUNCTIONS}), data


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda ex: ex.name)
def test_each_modelled_mistake_is_named_when_a_learner_makes_it(ex):
    """A learner whose code IS the modelled mistake gets exactly that mistake's 'Likely mistake' line (one
    failing case at least, and no other model fits), so no line is shown without a failure it explains."""
    needs_model(ex)
    cases, solution, data = solution_and_data(ex)
    ctx = context()
    all_cases = cases.cases(ctx)
    statistical = hasattr(cases, "expected")
    for i, mistake in enumerate(cases.MISTAKES):
        fns = SimpleNamespace(**{**vars(solution), **mistake.functions})
        # statistical exercises: only the cases where the recorded mistake fails (diagnose then asks no more)
        graded = [case for case in all_cases if not statistical or case.name in data["mistakes"][str(i)]]
        outputs = {case.name: cases.call(fns, case, ctx) for case in graded}
        failing = {case.name: case for case in graded
                   if cases.check(outputs[case.name], data["expected"][case.name], case) is not None}
        assert failing, f"{ex.name}: the mistake {mistake.message[:60]!r} fails no case"
        assert diagnose(cases, data, outputs, failing, {case.name: case for case in graded}) == mistake.message, (
            f"{ex.name}: {mistake.message[:60]!r} is not named for its own outputs (failing: {sorted(failing)})")


def total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a.double() / a.sum() - b.double() / b.sum()).abs().sum())


def test_chain_rejection_mistakes_move_the_exact_law():
    cases = cases_module(resolve(EXERCISES, "6"))
    right = cases.chain_law()
    t = cases.TARGET.double()
    assert torch.allclose(right, torch.einsum("a,b,c->abc", t[0], t[1], t[2]).flatten(), atol=1e-7)  # lossless
    assert set(cases.VARIANTS) == set(cases.MESSAGES) and len(cases.MISTAKES) == len(cases.VARIANTS)
    for name, variant in cases.VARIANTS.items():
        assert total_variation(cases.chain_law(*variant), right) >= TV_MIN, name


def test_tree_rejection_mistakes_move_the_exact_law():
    """The law of the sequences or of the accepted lengths (both are graded) moves by >= 0.05 for each mistake,
    the residual against the original q included (0.005 on the tree graded before)."""
    cases = cases_module(resolve(EXERCISES, "7"))
    sequences, lengths = cases.tree_law()
    t0, t1, t2 = cases.TARGET0.double(), cases.TARGET1.double(), cases.TARGET2.double()
    assert torch.allclose(sequences, (t0[:, None, None] * t1[:, :, None] * t2).flatten(), atol=1e-7)  # lossless
    assert math.isclose(float(lengths.sum()), 1.0, abs_tol=1e-6)  # the float32 constants sum to 1 within ~1e-7
    assert set(cases.VARIANTS) == set(cases.MESSAGES) and len(cases.MISTAKES) == len(cases.VARIANTS)
    for name, flags in cases.VARIANTS.items():
        s, l = cases.tree_law(**flags)
        assert max(total_variation(s, sequences), total_variation(l, lengths)) >= TV_MIN, name
    chain_case = next(c for c in cases.cases(context()) if c.name == "chain of 6")
    assert math.isclose(float(cases.expected(chain_case, context())[1].sum()), 1.0, abs_tol=1e-6)


def test_the_tree_law_enumeration_matches_sampling():
    """tree_law is checked against 8,000 samples of the variant sampler with the largest effect on the lengths
    (first child only): every length frequency within 4 standard errors (< 0.023)."""
    cases = cases_module(resolve(EXERCISES, "7"))
    _, law = cases.tree_law(siblings=False)
    g, generator = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)
    counts = torch.zeros(3)
    for _ in range(8_000):
        tokens, draft, target = cases._tree(g, False)
        path, _ = verify(tokens, cases.PARENTS, draft, target, generator, siblings=False)
        counts[len(path) - 1] += 1
    freq = counts / counts.sum()
    se = (law * (1 - law) / 8_000).sqrt()
    assert bool(((freq.double() - law).abs() <= 4 * se).all()), (freq, law)


def test_guard_names_the_changed_argument_and_ignores_other_objects():
    log = []

    def f(parents, probs, hw, model):
        parents.append(1)
        return 0

    guarded(f, "f", log)([-1, 0], torch.ones(2), {"a": 1.0}, object())
    assert log and "modified the caller's `parents`" in log[0] and "list(parents)" in log[0]
    nan = torch.tensor([float("nan"), 1.0])
    assert change(snapshot(nan), nan.clone()) is None  # NaN == NaN for this purpose
    probs = torch.ones(3)
    before = snapshot(probs)
    probs[1] = 2
    assert "entry [1]" in change(before, probs)
    hw = {"x": 1.0}
    before = snapshot(hw)
    hw["x"] = 2.0
    assert "key 'x'" in change(before, hw)
    assert change(snapshot(torch.Generator()), torch.Generator()) is None


def correct_build_tree(drafter, context, root, branching, reset_counter):
    """Exercise 11's rule, written as a learner would, optionally zeroing the drafter's own counter."""
    if reset_counter:
        drafter.calls = 0
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, frontier)
        new = []
        for node, kids in zip(frontier, logits.topk(width, dim=-1).indices.tolist()):
            for token in kids:
                new.append(len(tokens))
                tokens.append(token)
                parents.append(node)
        frontier = new
    if reset_counter:
        drafter.calls = 0
    return tokens, parents


def test_drafter_calls_are_counted_where_the_learner_cannot_reset_them():
    ex = resolve(EXERCISES, "11")
    needs_model(ex)
    cases, _, data = solution_and_data(ex)
    ctx = context()
    case = next(c for c in cases.cases(ctx) if c.args["branching"] == [2, 2, 1, 1])
    honest = SimpleNamespace(build_tree=lambda d, c, r, b: correct_build_tree(d, c, r, b, reset_counter=True))
    assert cases.check(cases.call(honest, case, ctx), data["expected"][case.name], case) is None

    def one_extra_call(d, c, r, b):
        d.next_logits(c, [r], [-1], [0])
        return correct_build_tree(d, c, r, b, reset_counter=True)

    out = cases.call(SimpleNamespace(build_tree=one_extra_call), case, ctx)
    assert "drafter calls (one per level): got 5, expected 4" in cases.check(out, data["expected"][case.name], case)


def test_forwards_are_counted_even_when_the_models_own_hooks_are_cleared():
    ex = resolve(EXERCISES, "10")
    needs_model(ex)
    cases, solution, data = solution_and_data(ex)
    ctx = context()
    case = next(c for c in cases.cases(ctx) if c.name == "six-node tree")

    def per_node(model, prefix, tokens, parents):
        model.embed_tokens._forward_pre_hooks.clear()
        rows = []
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.append(tokens[node])
                node = parents[node]
            with torch.inference_mode():
                rows.append(model(torch.tensor([prefix + path[::-1]]))[0, -1])
        return torch.stack(rows)

    out = cases.call(SimpleNamespace(tree_logits=per_node), case, ctx)
    assert isinstance(out, str) and "used 6 forward calls" in out
    hooks_cleared = SimpleNamespace(tree_logits=lambda m, *a: (m.embed_tokens._forward_pre_hooks.clear(),
                                                               solution.tree_logits(m, *a))[1])
    assert cases.check(cases.call(hooks_cleared, case, ctx), data["expected"][case.name], case) is None


def test_numbers_of_other_types_are_graded_as_the_int_or_float_they_equal():
    import numpy as np

    from practice.judgekit.compare import int_mismatch, tokens_mismatch
    from practice.judgekit.wire import decode, encode

    tensors: dict = {}
    got = decode(encode([np.int64(3), np.float64(0.5), (np.int32(2),), True], tensors), tensors)
    assert got == [3, 0.5, (2,), True] and [type(v) for v in got] == [int, float, tuple, bool]
    assert tokens_mismatch(decode(encode([np.int64(4), np.int64(5)], tensors), tensors), [4, 5], "t") is None
    assert int_mismatch(torch.tensor(14), 14, "nodes") is None  # a 0-d integer tensor, as float_mismatch reads floats
    assert "expected an int" in int_mismatch(torch.tensor(14.0), 14, "nodes")
    assert "expected an int" in int_mismatch(14.0, 14, "nodes")


def test_the_outcome_law_of_one_tree_matches_sampling():
    """judgekit.rejection.outcome_law (the expected counts a failing exercise-07 case shows) against 6,000 draws of
    the solution's rule on one drafted tree of each shape: every (path, next token) frequency within 4 standard
    errors."""
    cases = cases_module(resolve(EXERCISES, "7"))
    for case in (c for c in cases.cases(context()) if c.args["kind"] in ("law", "shape")):
        shape, draw = cases._case_shape(case)
        tokens, draft, target = draw(torch.Generator().manual_seed(case.args["seed"]))
        law, counts, generator = outcome_law(tokens, shape.parents, draft, target), {}, torch.Generator().manual_seed(1)
        for _ in range(6_000):
            path, token = verify(tokens, shape.parents, draft, target, generator)
            counts[tuple(path), token] = counts.get((tuple(path), token), 0) + 1
        assert set(counts) <= set(law), case.name
        assert math.isclose(sum(law.values()), 1.0, abs_tol=1e-6), case.name  # float32 rows
        for outcome, prob in law.items():
            se = math.sqrt(prob * (1 - prob) / 6_000)
            assert abs(counts.get(outcome, 0) / 6_000 - prob) <= 4 * se + 1e-9, (case.name, outcome)


def test_the_chain_outcome_law_completes_to_the_chain_law():
    """Exercise 06's outcome_law (the expected counts a failing case shows), averaged over the drafts and completed
    from the target rows, is the exact law of the emitted sequences the case grades."""
    cases = cases_module(resolve(EXERCISES, "6"))
    d, t, V, K = cases.DRAFT.double(), cases.TARGET.double(), cases.V, cases.K
    law = torch.zeros(V, V, V, dtype=torch.float64)
    for x0 in range(V):
        for x1 in range(V):
            for (n, nxt), prob in cases.outcome_law([x0, x1], cases.DRAFT, cases.TARGET).items():
                w = float(d[0, x0] * d[1, x1]) * prob
                if n == 0:
                    law[nxt] += w * torch.outer(t[1], t[2])
                elif n == 1:
                    law[x0, nxt] += w * t[2]
                else:
                    law[x0, x1, nxt] += w
    assert torch.allclose(law.flatten(), cases.chain_law(), atol=1e-7)
