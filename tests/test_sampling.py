"""verify_chain / verify_tree emit exactly the target distribution (chi-square), and a verifier that
skips the residual does not (negative control)."""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence

import pytest
import torch

from mini_llm import Config, Transformer, load_model, logits_to_probs
from tree_spec.core import sampling
from tree_spec.analysis.stats import paired_distributions
from tree_spec.core.sampling import residual, verify_chain, verify_tree
from tree_spec.analysis.stats import chi_square

# Each lossless setting must give p > P_PASS: under the null a seeded setting fails with probability
# 0.1 %, and the seeds are fixed, so the outcome is deterministic. The biased verifier must give
# p < P_REJECT; its bias is large (>= 5 % of mass moved), so its p-values are astronomically small.
P_PASS, P_REJECT = 1e-3, 1e-6
SAMPLES = 5000  # verify steps per setting: ~10-100 expected counts per joint bin, a few seconds each

# context (tuple of token ids) -> (target_probs [V], draft_probs [V]) for the next token
Oracle = Callable[[tuple[int, ...]], tuple[torch.Tensor, torch.Tensor]]


def markov_oracle(vocab: int, alpha: float, generator: torch.Generator) -> Oracle:
    """Target and draft next-token distributions that depend on the last token, acceptance alpha."""
    target, draft = paired_distributions(vocab, alpha, (vocab,), generator)  # [V, V] each
    return lambda context: (target[context[-1]], draft[context[-1]])


class ModelOracle:
    """Temperature-sampled next-token distributions of a target and a draft Transformer, memoized."""

    def __init__(self, target: Transformer, draft: Transformer, temperature: float, top_k: int) -> None:
        self.target, self.draft, self.temperature, self.top_k = target, draft, temperature, top_k
        self.memo: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}

    @torch.inference_mode()
    def __call__(self, context: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        if context not in self.memo:
            ids = torch.tensor([context], device="cpu")
            self.memo[context] = tuple(
                logits_to_probs(model(ids)[0, -1], self.temperature, self.top_k) for model in (self.target, self.draft)
            )
        return self.memo[context]


def draw(probs: torch.Tensor, generator: torch.Generator, n: int = 1) -> list[int]:
    """n distinct tokens drawn sequentially without replacement from probs [V]."""
    return torch.multinomial(probs, n, replacement=False, generator=generator).tolist()


def chain_step(oracle: Oracle, context: tuple[int, ...], k: int, generator: torch.Generator) -> list[int]:
    """Draft k tokens, verify them with verify_chain; returns the emitted tokens."""
    drafts, draft_rows, target_rows = [], [], []
    for _ in range(k):
        target_probs, draft_probs = oracle(context + tuple(drafts))
        drafts += draw(draft_probs, generator)
        draft_rows.append(draft_probs)
        target_rows.append(target_probs)
    target_rows.append(oracle(context + tuple(drafts))[0])
    n, token = verify_chain(drafts, torch.stack(draft_rows), torch.stack(target_rows), generator)
    return drafts[:n] + [token]


def tree_step(
    oracle: Oracle, context: tuple[int, ...], branching: Sequence[int], generator: torch.Generator
) -> list[int]:
    """Draft a full tree (top-w children per node, drawn without replacement), verify it with verify_tree."""
    tokens, parents, contexts, level = [context[-1]], [-1], [context], [0]
    for w in branching:
        next_level = []
        for node in level:
            for token in draw(oracle(contexts[node])[1], generator, w):
                next_level.append(len(tokens))
                tokens.append(token)
                parents.append(node)
                contexts.append(contexts[node] + (token,))
        level = next_level
    target_probs, draft_probs = (torch.stack(rows) for rows in zip(*map(oracle, contexts)))
    path, token = verify_tree(tokens, parents, draft_probs, target_probs, generator)
    return [tokens[i] for i in path[1:]] + [token]


def joint_p_value(oracle: Oracle, context: tuple[int, ...], step: Callable[[], list[int]], seed: int) -> float:
    """Chi-square p-value of the first two emitted tokens vs the target's joint law.

    The second token comes from the same verify step when it emitted two or more, else from the
    target after the first (what the next step would do). Expected [S + 1, V]: row s is the s-th
    token of the root's target support; the last row (expected 0) catches impossible first tokens.
    """
    generator = torch.Generator().manual_seed(seed)
    root = oracle(context)[0]
    support = root.nonzero().flatten().tolist()
    row_of = {token: i for i, token in enumerate(support)}
    expected = torch.zeros(len(support) + 1, root.shape[0], dtype=torch.float64, device="cpu")
    for token, i in row_of.items():
        expected[i] = root[token].double() * oracle(context + (token,))[0].double()
    counts = torch.zeros_like(expected)
    for _ in range(SAMPLES):
        emitted = step()
        first = emitted[0]
        second = emitted[1] if len(emitted) > 1 else draw(oracle(context + (first,))[0], generator)[0]
        counts[row_of.get(first, len(support)), second] += 1
    return chi_square(counts, expected)[1]


def chain_p_value(oracle: Oracle, k: int, seed: int) -> float:
    generator, context = torch.Generator().manual_seed(seed), (0,)
    return joint_p_value(oracle, context, lambda: chain_step(oracle, context, k, generator), seed + 1)


def tree_p_value(oracle: Oracle, branching: Sequence[int], seed: int) -> float:
    generator, context = torch.Generator().manual_seed(seed), (0,)
    return joint_p_value(oracle, context, lambda: tree_step(oracle, context, branching, generator), seed + 1)


@pytest.mark.parametrize("vocab, alpha, k", [(2, 0.3, 1), (8, 0.5, 3), (12, 0.9, 6)])
def test_verify_chain_is_lossless(vocab: int, alpha: float, k: int) -> None:
    oracle = markov_oracle(vocab, alpha, torch.Generator().manual_seed(vocab))
    assert chain_p_value(oracle, k, seed=1) > P_PASS


@pytest.mark.parametrize("vocab, alpha, branching", [(6, 0.5, [2, 2, 1]), (10, 0.7, [3, 2]), (5, 0.4, [4])])
def test_verify_tree_is_lossless(vocab: int, alpha: float, branching: list[int]) -> None:
    oracle = markov_oracle(vocab, alpha, torch.Generator().manual_seed(vocab))
    assert tree_p_value(oracle, branching, seed=2) > P_PASS


def test_skipping_the_residual_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the same tests reject a verifier that resamples from target_probs."""
    monkeypatch.setattr(sampling, "residual", lambda target_probs, draft_probs: target_probs)
    assert chain_p_value(markov_oracle(8, 0.5, torch.Generator().manual_seed(8)), 3, seed=1) < P_REJECT
    assert tree_p_value(markov_oracle(6, 0.5, torch.Generator().manual_seed(6)), [2, 2, 1], seed=2) < P_REJECT


def random_model_pair(seed: int = 0) -> tuple[Transformer, Transformer]:
    """A random tiny target and a perturbed copy as its draft (seeded, no global RNG)."""
    generator = torch.Generator().manual_seed(seed)
    cfg = Config(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16)
    with torch.device("cpu"):
        target = Transformer(cfg).eval()
    with torch.no_grad():
        for name, p in target.named_parameters():
            p.copy_(torch.ones_like(p) if "norm" in name
                    else torch.randn(p.shape, generator=generator, device="cpu") * 0.5)
        draft = copy.deepcopy(target)
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=generator, device="cpu") * 0.3)
    return target, draft


def model_pair() -> tuple[Transformer, Transformer]:
    """The embedded tiny-qwen3 target and draft when present (retrying: they may be mid re-export), else random."""
    for _ in range(3):
        try:
            target, draft = load_model("tiny-qwen3"), load_model("tiny-qwen3-draft")
        except FileNotFoundError:
            break
        except Exception:  # a checkpoint being rewritten right now: wait and retry
            time.sleep(2)
            continue
        if target.cfg.vocab_size == draft.cfg.vocab_size:
            return target, draft
        break
    return random_model_pair()


@pytest.fixture(scope="module")
def real_oracle() -> ModelOracle:
    # temperature 0.8 with top-k 12: a realistic sampled step, with supports that differ between models
    return ModelOracle(*model_pair(), temperature=0.8, top_k=12)


def test_verify_chain_on_a_real_model_step(real_oracle: ModelOracle) -> None:
    assert chain_p_value(real_oracle, 2, seed=3) > P_PASS


def test_verify_tree_on_a_real_model_step(real_oracle: ModelOracle) -> None:
    assert tree_p_value(real_oracle, [2, 2], seed=4) > P_PASS


def test_residual() -> None:
    target, draft = torch.tensor([0.5, 0.3, 0.2], device="cpu"), torch.tensor([0.2, 0.6, 0.2], device="cpu")
    torch.testing.assert_close(residual(target, draft), torch.tensor([1.0, 0.0, 0.0], device="cpu"))
    torch.testing.assert_close(residual(target, target), target)  # degenerate case: falls back to the target
    batch = torch.stack([target, draft])
    torch.testing.assert_close(residual(batch, batch.flip(0)), torch.tensor([[1.0, 0, 0], [0, 1.0, 0]], device="cpu"))


def test_paired_distributions_have_the_requested_acceptance() -> None:
    target, draft = paired_distributions(16, 0.7, (3,), torch.Generator().manual_seed(0))
    torch.testing.assert_close(torch.minimum(target, draft).sum(-1), torch.full((3,), 0.7, device="cpu"))
    torch.testing.assert_close(target.sum(-1), torch.ones(3, device="cpu"))
    assert (residual(target, draft) - target).abs().sum(-1).min() > 0.1  # the residual is not the target
    with pytest.raises(ValueError, match="vocab_size"):
        paired_distributions(1, 0.5)
    with pytest.raises(ValueError, match="alpha"):
        paired_distributions(4, 0.0)


def test_verify_chain_edge_cases() -> None:
    generator = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.25, 0.75], [0.5, 0.5], [0.9, 0.1]], device="cpu")
    for _ in range(20):  # draft == target: every draft is accepted, the bonus comes from the last row
        assert verify_chain([1, 0], probs[:2], probs, generator)[0] == 2
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5]], device="cpu")
    one_draft = torch.tensor([[1.0, 0.0]], device="cpu")
    assert verify_chain(torch.tensor([0], device="cpu"), one_draft, target, generator) == (0, 1)
    with pytest.raises(ValueError, match="target_probs"):
        verify_chain([1, 0], probs[:2], probs[:2], generator)
    with pytest.raises(ValueError, match="draft_probs"):
        verify_chain([1], probs[:2], probs, generator)


def test_verify_tree_edge_cases() -> None:
    generator = torch.Generator().manual_seed(0)
    uniform = torch.full((3, 3), 1 / 3, device="cpu")
    target = torch.tensor([[0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]], device="cpu")
    for _ in range(20):  # children 0 and 1 have target probability 0: both rejected, token 2 follows
        assert verify_tree([5, 0, 1], [-1, 0, 0], uniform, target, generator) == ([0], 2)
    path, _ = verify_tree([5, 2, 1], [-1, 0, 1], uniform, uniform, generator)
    assert path[0] == 0 and path == list(range(len(path)))
    for bad, problem in [([], "empty"), ([0, 0, 0], "root"), ([-1, 0, 2], "parents\\[2\\]")]:
        with pytest.raises(ValueError, match=problem):
            verify_tree([0] * len(bad), bad, uniform[: len(bad)], uniform[: len(bad)], generator)
    with pytest.raises(ValueError, match="tokens"):
        verify_tree([0, 1], [-1, 0, 0], uniform, uniform, generator)
