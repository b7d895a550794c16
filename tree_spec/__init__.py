"""tree_spec: speculative decoding on mini_llm: token trees, lossless verification, drafters, decoding loops.

The names below are what a learner calls. The layout (see docs/ARCHITECTURE.md):
- `core`: the rules: tree topology, greedy acceptance, lossless verification, tree growth, the contracts;
- `drafters`: the draft sources (small model, quantized self, n-gram, lookahead, Medusa / EAGLE / MTP heads);
- `decoding`: the loops (chain, tree, dynamic tree, lookahead, batched);
- `fixed_shape`: the same loops in fixed tensor shapes, for CUDA graphs;
- `analysis` and `ui`: the course's measurement, widgets and plots;
- `tools`: the command-line tools (the benchmark, the shape tuner, the fixed-shape bench).
"""
from .core.accept import accept_greedy
from .core.contracts import DraftTree, SamplingParams
from .core.growth import build_draft_tree, build_dynamic_tree
from .core.output import SpecOutput
from .core.sampling import residual, verify_chain, verify_tree
from .core.topology import depths, positions, tree_mask
from .decoding.batch import batch_speculative_generate
from .decoding.chain import speculative_generate
from .decoding.dynamic import dynamic_tree_speculative_generate
from .decoding.lookahead import lookahead_generate
from .decoding.tree import tree_speculative_generate
from .drafters.base import Drafter
from .drafters.head_io import load_head
from .drafters.lookahead import LookaheadDrafter
from .drafters.model import ModelDrafter, QuantizedSelfDrafter
from .drafters.ngram import NGramDrafter

__all__ = [
    "DraftTree", "Drafter", "LookaheadDrafter", "ModelDrafter", "NGramDrafter", "QuantizedSelfDrafter", "SamplingParams", "SpecOutput",
    "accept_greedy", "batch_speculative_generate", "build_draft_tree", "build_dynamic_tree", "depths",
    "dynamic_tree_speculative_generate", "load_head", "lookahead_generate", "positions", "residual",
    "speculative_generate", "tree_mask", "tree_speculative_generate", "verify_chain", "verify_tree",
]
