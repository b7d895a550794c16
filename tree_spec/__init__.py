"""tree_spec: speculative decoding on mini_llm — token trees, lossless verification, drafters, speedup math."""
from .batch import batch_speculative_generate
from .chain import speculative_generate
from .costs import CostCurve, DrafterCost, compare_profiles, measure_drafter_cost, measure_target_costs, profile_forward
from .drafters import Drafter, ModelDrafter, QuantizedSelfDrafter, TargetFeatures, as_drafter
from .dynamic import build_dynamic_tree, dynamic_tree_speculative_generate
from .feature_drafters import HeadDrafter, MedusaDrafter
from .head_io import load_head
from .lookahead import LookaheadDrafter, lookahead_generate
from .ngram import NGramDrafter
from .output import SpecOutput
from .sampling import residual, verify_chain, verify_tree
from .static_chain import StaticChain, static_speculative_generate
from .static_tree import StaticTree, static_dynamic_tree_generate
from .speedup import (
    break_even_alpha, chi_square, expected_speedup, expected_tokens_per_verify, roofline_step_time, simulate_tail,
    speedup_table, tree_expected_tokens, wall_time_per_token,
)
from .tree import (
    DraftTree, accept_greedy, build_draft_tree, depths, positions, tree_mask, tree_speculative_generate,
    validate_parents,
)

__all__ = [
    "CostCurve", "DrafterCost", "compare_profiles", "measure_drafter_cost", "measure_target_costs", "profile_forward",
    "Drafter", "DraftTree", "HeadDrafter", "LookaheadDrafter", "MedusaDrafter", "ModelDrafter", "NGramDrafter",
    "QuantizedSelfDrafter",
    "SpecOutput", "StaticChain", "StaticTree", "TargetFeatures", "accept_greedy", "as_drafter", "break_even_alpha", "build_draft_tree",
    "build_dynamic_tree", "chi_square", "depths", "dynamic_tree_speculative_generate", "expected_speedup",
    "expected_tokens_per_verify", "load_head", "lookahead_generate", "positions", "residual", "roofline_step_time",
    "simulate_tail",
    "speculative_generate", "speedup_table", "static_dynamic_tree_generate", "static_speculative_generate", "tree_expected_tokens", "tree_mask", "tree_speculative_generate",
    "validate_parents", "verify_chain", "verify_tree", "wall_time_per_token",
]
