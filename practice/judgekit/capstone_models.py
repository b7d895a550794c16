"""What a capstone run runs on: its plan (how much), the models, and the greedy rows (one per drafting piece)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mini_llm import Transformer, load_model, load_tokenizer
from tree_spec import ModelDrafter, NGramDrafter, load_head
from tree_spec.core.contracts import Branching, DynamicShape, Proposer

from .capstone_drafters import ConfidentProposer, Eagle2Proposer, NGramProposer, TreeProposer
from .capstone_loop import Pieces, Shadow
from .settings import REPO, Settings


@dataclass(frozen=True)
class Plan:
    """How much the capstone runs: the full run (the learner's) or the suite's fast mode."""

    prompts: int = 8
    new_tokens: int = 64
    tree_forward_prompts: int = 4
    samples: int = 600
    sample_tokens: int = 3

    @classmethod
    def fast(cls) -> Plan:
        return cls(prompts=2, new_tokens=16, tree_forward_prompts=1, samples=100)


@dataclass
class Models:
    """The target, its tokenizer, the small draft model and the shipped MTP and EAGLE heads."""

    target: Transformer
    tokenizer: Any
    small: ModelDrafter
    mtp: Any
    eagle: Any

    @classmethod
    def load(cls, settings: Settings) -> Models:
        target = load_model(settings.model_path())
        heads = REPO / "models" / "heads"
        return cls(target, load_tokenizer(settings.model_path()), ModelDrafter(load_model(REPO / "models" / "tiny-qwen3-draft")),
                   load_head(heads / "mtp", target), load_head(heads / "eagle", target))


@dataclass
class RowSpec:
    """A greedy row: the drafting piece, its form, the shape, the learner's proposer and the package's drafter."""

    key: str
    name: str
    form: str
    shape: Branching | DynamicShape
    learner: Callable[[Pieces, Shadow], Proposer]
    package: Proposer


def row_specs(m: Models) -> list[RowSpec]:
    """Prompt lookup (12, a chain), draft tree (11), EAGLE-2 (13) and confident chain (15)."""
    vocab = m.target.cfg.vocab_size
    chain6 = Branching((1,) * 6, min_path_prob=0.3)
    return [
        RowSpec("12", "prompt lookup", "chain k=5, n = 4..1", Branching((1,) * 5),
                lambda p, s: NGramProposer(p, s, vocab, 5), NGramDrafter(vocab)),
        RowSpec("11", "draft tree · MTP head", "tree [2, 1, 1, 1]", Branching((2, 1, 1, 1)),
                lambda p, s: TreeProposer(p, s, m.mtp, [2, 1, 1, 1]), m.mtp),
        RowSpec("13", "EAGLE-2 · EAGLE head", "dynamic depth 5, top_k 4, 16 tokens", DynamicShape(5, 4, 16),
                lambda p, s: Eagle2Proposer(p, s, m.eagle, 5, 4, 16), m.eagle),
        RowSpec("15", "confident chain · MTP head", "chain k<=6, theta 0.3", chain6,
                lambda p, s: ConfidentProposer(p, s, m.mtp, 6, 0.3), m.mtp),
    ]
