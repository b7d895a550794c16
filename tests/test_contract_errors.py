"""Every mistake a learner's drafter can make against the proposer contract is an error naming the drafter's class
and the broken rule or member, raised before it can surface as a KV-cache overflow or a failure inside verify."""
import pytest
import torch

from tree_spec import (
    Drafter, DraftTree, SamplingParams, batch_speculative_generate, dynamic_tree_speculative_generate,
    speculative_generate, tree_speculative_generate,
)
from tests.spec_models import TINY, prompts, random_model

V = TINY["vocab_size"]
PROMPT = prompts(V, 1, length=8, seed=3)[0]


@pytest.fixture(scope="module")
def target():
    return random_model(seed=0)


def sampled() -> SamplingParams:
    return SamplingParams(1.0, generator=torch.Generator().manual_seed(0))


def refusal(error: type[Exception], run, *names: str) -> str:
    """Run `run`, expect `error`, check its message names every one of `names`; -> the message."""
    with pytest.raises(error) as caught:
        run()
    message = str(caught.value)
    for name in names:
        assert name in message, f"{name!r} not in {message!r}"
    return message


class LevelDrafter(Drafter):
    """A level-wise drafter whose `next_logits` answer is `answer(frontier)`."""

    def __init__(self, answer) -> None:
        super().__init__(V, "cpu")
        self.answer = answer

    def next_logits(self, context, tokens, parents, frontier):
        return self.answer(frontier)


class WholeTree(Drafter):
    """A whole-tree proposer that returns `tree(request)`."""

    def __init__(self, tree) -> None:
        super().__init__(V, "cpu")
        self.tree = tree

    def propose(self, request):
        return self.tree(request)

    def next_logits(self, context, tokens, parents, frontier):
        raise AssertionError("never called: propose is overridden")


def test_a_drafter_subclass_that_never_calls_the_base_init_is_refused_naming_the_members_it_lacks(target):
    class ForgotInit(Drafter):
        def __init__(self) -> None:  # never calls super().__init__(vocab_size, device)
            self.table = torch.zeros(V)

        def next_logits(self, context, tokens, parents, frontier):
            return self.table.expand(len(frontier), -1)

    message = refusal(TypeError, lambda: speculative_generate(target, ForgotInit(), PROMPT, 8, k=2),
                      "ForgotInit is not a Proposer", "calls", "vocab_size", "device",
                      "super().__init__(vocab_size, device)")
    assert "feature_layers" not in message and "observe_verify" not in message  # the base gives those


def test_a_proposer_without_observe_verify_is_refused_naming_it(target):
    class NoObserveVerify:
        feature_layers = None

        def __init__(self) -> None:
            self.calls, self.vocab_size, self.device = 0, V, torch.device("cpu")

        def reset(self, max_len):
            pass

        def observe(self, features):
            pass

        def propose(self, request):
            return DraftTree([request.root], [-1])

    refusal(TypeError, lambda: tree_speculative_generate(target, NoObserveVerify(), PROMPT, 8),
            "NoObserveVerify is not a Proposer: it lacks observe_verify (", "subclass tree_spec.Drafter")
    refusal(TypeError, lambda: batch_speculative_generate(target, NoObserveVerify(), [PROMPT], 8),
            "NoObserveVerify is not a Proposer: it lacks observe_verify")


@pytest.mark.parametrize("sampling", [None, "sampled"])
def test_next_logits_of_one_row_per_vocabulary_not_per_frontier_node_is_refused(target, sampling):
    drafter = LevelDrafter(lambda frontier: torch.zeros(V))  # [V]: forgot the frontier dimension
    run = lambda: speculative_generate(target, drafter, PROMPT, 8, k=2, **({"sampling": sampled()} if sampling else {}))
    refusal(ValueError, run, "LevelDrafter.next_logits returned shape", f"({V},)",
            f"[len(frontier), vocab_size] = (1, {V})")


@pytest.mark.parametrize("sampling", [None, "sampled"])
def test_next_logits_with_one_row_too_many_is_refused(target, sampling):
    drafter = LevelDrafter(lambda frontier: torch.zeros(len(frontier) + 1, V))
    run = lambda: tree_speculative_generate(target, drafter, PROMPT, 8, branching=[2, 2],
                                            **({"sampling": sampled()} if sampling else {}))
    refusal(ValueError, run, "LevelDrafter.next_logits returned shape (2,", "for 1 frontier nodes",
            "one row of logits per frontier node")


@pytest.mark.parametrize("sampling", [None, "sampled"])
def test_a_row_without_a_finite_logit_is_refused_naming_the_node(target, sampling):
    def answer(frontier):
        rows = torch.zeros(len(frontier), V)
        rows[-1] = float("-inf")  # the last frontier node's row gives no token a chance
        return rows

    run = lambda: dynamic_tree_speculative_generate(target, LevelDrafter(answer), PROMPT, 8, depth=2, width=2,
                                                    total_tokens=4, **({"sampling": sampled()} if sampling else {}))
    refusal(ValueError, run, "LevelDrafter.next_logits gave frontier node 0 no finite logit",
            "every row needs at least one token")


def test_a_whole_tree_proposer_without_draft_probs_under_sampling_is_refused(target):
    drafter = WholeTree(lambda request: DraftTree([request.root, 5, 6], [-1, 0, 1]))
    run = lambda: speculative_generate(target, drafter, PROMPT, 8, k=2, sampling=sampled())
    refusal(ValueError, run, "WholeTree proposed a tree without draft_probs under sampling",
            "DraftTree.draft_probs [n, V]")


def test_draft_probs_of_the_wrong_shape_are_refused_stating_the_rule(target):
    drafter = WholeTree(lambda request: DraftTree([request.root, 5, 6], [-1, 0, 0], torch.zeros(2, V)))
    run = lambda: tree_speculative_generate(target, drafter, PROMPT, 8, branching=[2], sampling=sampled())
    refusal(ValueError, run, f"WholeTree proposed draft_probs (2, {V}) for a tree of 3 nodes",
            f"[n, V] = [3, {V}]", "a chain may leave out its leaf's row")


def test_forty_siblings_for_a_chain_of_two_are_refused_naming_the_limit(target):
    drafter = WholeTree(lambda request: DraftTree([request.root] + [5] * 40, [-1] + [0] * 40))
    run = lambda: speculative_generate(target, drafter, PROMPT, 20, k=2)
    refusal(ValueError, run, "WholeTree proposed 40 draft nodes, more than the 2 its request's shape holds",
            "Branching(widths=(1, 1)")


def test_a_ten_deep_chain_for_a_chain_of_two_is_refused_naming_the_limit(target):
    drafter = WholeTree(lambda request: DraftTree([request.root] + [5] * 10, list(range(-1, 10))))
    message = refusal(ValueError, lambda: speculative_generate(target, drafter, PROMPT, 20, k=2),
                      "WholeTree proposed a tree 10 deep, deeper than the 2 levels the request allows",
                      "its shape's depth 2")
    assert "max_depth 18" in message  # 20 tokens, the first from the prefill: 18 drafts at most, more than 2
    refusal(ValueError, lambda: batch_speculative_generate(target, drafter, [PROMPT], 20, k=2),
            "WholeTree proposed a tree 10 deep")


def test_a_dynamic_tree_over_its_total_tokens_is_refused_naming_the_limit(target):
    drafter = WholeTree(lambda request: DraftTree([request.root, 5, 6, 7, 8], [-1, 0, 0, 1, 1]))
    run = lambda: dynamic_tree_speculative_generate(target, drafter, PROMPT, 20, depth=3, width=2, total_tokens=3)
    refusal(ValueError, run, "WholeTree proposed 4 draft nodes, more than the 3", "DynamicShape(depth=3, width=2, "
            "total_tokens=3")
