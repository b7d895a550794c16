"""The proposer contract: a drafter written against `Proposer` alone (no base class) runs in every loop."""
import pytest
import torch

from mini_llm import generate
from tree_spec import (
    DraftTree, batch_speculative_generate, dynamic_tree_speculative_generate, lookahead_generate, speculative_generate,
    tree_speculative_generate,
)
from tree_spec.core.contracts import DraftRequest, Proposer
from tests.spec_models import prompts, random_model


class EchoProposer:
    """Drafts, as a chain, what followed the root's last earlier occurrence in the context (prompt lookup)."""

    feature_layers = None

    def __init__(self, vocab_size: int) -> None:
        self.calls, self.vocab_size, self.device = 0, vocab_size, torch.device("cpu")

    def reset(self, max_len: int) -> None:
        """Keeps no state between sequences."""

    def propose(self, request: DraftRequest) -> DraftTree:
        self.calls += 1
        seen = request.context + [request.root]
        starts = [i + 1 for i in range(len(seen) - 1) if seen[i] == request.root]
        chain = seen[starts[-1]:][: min(request.max_depth, request.shape.depth)] if starts else []
        return DraftTree([request.root, *chain], list(range(-1, len(chain))))

    def observe(self, features) -> None:
        """Reads no features."""

    def observe_verify(self, tokens, parents, target_logits) -> None:
        """Learns nothing from the verify pass."""


LOOPS = {
    "chain": lambda t, d, p: speculative_generate(t, d, p, 40, k=3),
    "tree": lambda t, d, p: tree_speculative_generate(t, d, p, 40, branching=[2, 1, 1]),
    "dynamic tree": lambda t, d, p: dynamic_tree_speculative_generate(t, d, p, 40, depth=3, width=2, total_tokens=6),
    "lookahead": lambda t, d, p: lookahead_generate(t, p, 40, window=3, drafter=d),
    "batch": lambda t, d, p: batch_speculative_generate(t, d, [p, p[:5]], 40, k=3)[0],
}


@pytest.mark.parametrize("loop", LOOPS)
def test_a_fifteen_line_proposer_runs_in_every_loop_greedy_identical(loop):
    target = random_model(seed=0)
    drafter = EchoProposer(target.cfg.vocab_size)
    assert isinstance(drafter, Proposer)
    prompt = prompts(target.cfg.vocab_size, 1, length=12, seed=4)[0] * 3  # repeats: the echo finds matches
    out = LOOPS[loop](target, drafter, prompt)
    assert out.tokens == generate(target, torch.tensor([prompt], device="cpu"), 40)[0].tolist()
    assert out.proposed > 0 and sum(out.accepted_per_call) > 0  # its drafts were verified, and some accepted
