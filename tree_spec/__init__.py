"""tree_spec: speculative decoding on mini_llm — token trees, lossless verification, drafters, speedup math."""
from .chain import speculative_generate
from .drafters import Drafter, ModelDrafter, QuantizedSelfDrafter, as_drafter
from .output import SpecOutput
from .sampling import residual, verify_chain, verify_tree
from .speedup import (
    break_even_alpha, chi_square, expected_speedup, expected_tokens_per_verify, roofline_step_time, simulate_tail,
    speedup_table, tree_expected_tokens, wall_time_per_token,
)
from .tree import (
    DraftTree, accept_greedy, build_draft_tree, depths, positions, tree_mask, tree_speculative_generate,
    validate_parents,
)

__all__ = [
    "Drafter", "DraftTree", "ModelDrafter", "QuantizedSelfDrafter", "SpecOutput", "accept_greedy", "as_drafter",
    "break_even_alpha", "build_draft_tree", "chi_square", "depths", "expected_speedup", "expected_tokens_per_verify",
    "positions", "residual", "roofline_step_time", "simulate_tail", "speculative_generate", "speedup_table",
    "tree_expected_tokens", "tree_mask", "tree_speculative_generate", "validate_parents", "verify_chain",
    "verify_tree", "wall_time_per_token",
]
