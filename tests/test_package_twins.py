"""A file that only imports the package's function under the exercise's name passes that exercise (practice/README.md
says so): the exercises teach the package's own rules. Graded through the judge's API, which records no progress."""
from pathlib import Path

import pytest

from practice.judgekit.catalog import discover
from practice.judgekit.grading import grade_file
from practice.judgekit.settings import PRACTICE, Settings

EXERCISES = {ex.name: ex for ex in discover(PRACTICE / "exercises")}

# exercise -> the twin file: the package's function(s) imported under the exercise's name(s)
TWINS = {
    "01-tree-mask": "from tree_spec import tree_mask\n",
    "03-accept-path": "from tree_spec import accept_greedy\n",
    "05-residual": "from tree_spec import residual\n",
    "06-chain-rejection": "from tree_spec import verify_chain\n",
    "07-tree-rejection": "from tree_spec import verify_tree\n",
    "08-speedup-math": ("from tree_spec.analysis.speedup import break_even_acceptance_ratio as break_even_alpha\n"
                        "from tree_spec.analysis.speedup import expected_speedup as speedup\n"
                        "from tree_spec.analysis.speedup import expected_tokens_per_verify as expected_tokens\n"),
}
# exercise -> why an import alone cannot pass it (the package's function has another signature or contract)
EXCLUDED = {
    "02-depths-positions": "two package functions, `depths(parents)` and `positions(parents, prefix_len)`",
    "04-tree-size": "`tree_node_count(branching)` returns the node count only, not (nodes, tokens of a batch)",
    "09-compact-path": "the package's move is `KVCache.compact`, which this exercise disables",
    "10-tree-forward": "the package verifies inside its loop (`decoding.rules.target_forward`, another signature)",
    "11-draft-tree": "`build_draft_tree` returns a `DraftTree` (a dataclass), not a (tokens, parents) tuple",
    "12-ngram-proposer": "`ngram_continuations` returns (n, followers), `prompt_lookup` continues the earliest "
                         "occurrence (vLLM's rule); both fall back to a shorter n",
    "13-eagle2-tree": "`build_dynamic_tree` takes a drafter, not a `next_logprobs(path)` function",
    "14-roofline": "`roofline_step_time` takes a `Roofline` dataclass, not a dict",
    "15-confident-chain": "`build_draft_tree(drafter, context, root, [1] * k, min_path_prob=theta)`: another "
                          "signature, and a `DraftTree` back",
}


def test_every_exercise_is_a_twin_or_excluded_with_a_reason():
    assert set(TWINS) | set(EXCLUDED) == set(EXERCISES) and not set(TWINS) & set(EXCLUDED)
    assert all(len(why) > 20 for why in EXCLUDED.values())


def test_the_readme_names_the_exercises_an_import_passes():
    readme = (PRACTICE / "README.md").read_text()
    promise = next(line for line in readme.split("\n\n") if "only imports the package's function" in line)
    assert all(f"{EXERCISES[name].number:02d}" in promise for name in TWINS), promise


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_file_that_imports_the_package_function_passes(name: str, tmp_path: Path):
    twin = tmp_path / f"{name}.py"
    twin.write_text(TWINS[name])
    result = grade_file(EXERCISES[name], twin, Settings(workspace=tmp_path / "workspace"))
    failing = [f"{c['name']}: {c['message']}" for c in result.get("cases", []) if not c["ok"]]
    assert result["status"] == "pass", (result["status"], result.get("detail"), failing)
    assert not (tmp_path / "workspace").exists()  # grading wrote no progress
