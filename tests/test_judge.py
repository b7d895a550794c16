"""The practice judge: record + check, pointed messages for wrong solutions, learner-facing verdicts.

Everything runs against a temporary workspace, temporary references and a private copy of the model
(the shipped one may be re-exported while the tests run), never the learner's practice/workspace.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.judge_support import judge, judge_env
from practice.judgekit.catalog import discover
from practice.judgekit.settings import PRACTICE, REPO


# one worker runs the whole module: the `check_output` fixture grades every exercise file once (~25 s)
pytestmark = pytest.mark.xdist_group("judge")

EXERCISES = discover(PRACTICE / "exercises")

# wrong solution -> words its diagnosis must contain (the mistake it points at)
POINTED = {
    ("01-tree-mask", "no_diagonal.py"): ["diagonal"],
    ("01-tree-mask", "causal.py"): ["causal", "siblings"],
    ("01-tree-mask", "int_dtype.py"): ["dtype", "torch.bool"],
    ("02-depths-positions", "index_positions.py"): ["index", "depth"],
    ("02-depths-positions", "off_by_one.py"): ["off by one", "prefix_len"],
    ("03-accept-path", "own_row.py"): ["parent's row"],
    ("03-accept-path", "returns_tokens.py"): ["node ids"],
    ("03-accept-path", "last_duplicate.py"): ["LAST child whose token matches", "lowest node id"],
    ("03-accept-path", "first_match.py"): ["first child whose token matches", "DEEPEST accepted node"],
    ("04-tree-size", "leaves_only.py"): ["last level"],
    ("04-tree-size", "counts_root.py"): ["includes the root"],
    ("05-residual", "no_renorm.py"): ["renormalized"],
    ("05-residual", "swapped.py"): ["swapped"],
    ("05-residual", "nan_on_degenerate.py"): ["non-finite", "target == draft"],
    ("06-chain-rejection", "inverted_ratio.py"): ["inverted", "min(1, target / draft)"],
    ("06-chain-rejection", "target_on_reject.py"): ["residual"],
    ("06-chain-rejection", "returns_tensor.py"): ["two ints", "Tensor"],
    ("07-tree-rejection", "no_sibling_residual.py"): ["sibling", "residual"],
    ("07-tree-rejection", "final_from_target.py"): ["every child is rejected", "final residual"],
    ("07-tree-rejection", "no_q_update.py"): ["q is not updated"],
    ("07-tree-rejection", "no_renorm.py"): ["not renormalized"],
    ("07-tree-rejection", "first_child_only.py"): ["only the first child", "lossless"],
    ("07-tree-rejection", "mutates_draft.py"): ["modified the caller's `draft_probs`"],
    ("08-speedup-math", "no_bonus.py"): ["own token"],
    ("08-speedup-math", "no_draft_cost.py"): ["drafting cost"],
    ("08-speedup-math", "alpha_one_crash.py"): ["ZeroDivisionError"],
    ("09-compact-path", "no_offset.py"): ["`start` offset"],
    ("09-compact-path", "length_off_by_one.py"): ["cache.length", "off by one"],
    ("09-compact-path", "uses_compact.py"): ["compact is disabled"],
    ("10-tree-forward", "no_mask.py"): ["tree mask"],
    ("10-tree-forward", "index_positions.py"): ["prefix_len + depth"],
    ("10-tree-forward", "one_forward_per_node.py"): ["ONE forward"],
    ("10-tree-forward", "forward_method_per_node.py"): ["ONE forward"],
    ("11-draft-tree", "frontier_index_parent.py"): ["position in the frontier"],
    ("11-draft-tree", "ascending_children.py"): ["highest logit"],
    ("12-ngram-proposer", "oldest_match.py"): ["OLDEST"],
    ("12-ngram-proposer", "matches_itself.py"): ["matched itself"],
    ("12-ngram-proposer", "no_overlap.py"): ["overlap the suffix"],
    ("12-ngram-proposer", "shorter_n_fallback.py"): ["fell back to a shorter n"],
    ("13-eagle2-tree", "no_frontier_pruning.py"): ["top_k", "cumulative score"],
    ("13-eagle2-tree", "root_counted.py"): ["plus the root"],
    ("13-eagle2-tree", "ties_high_id.py"): ["tie", "LOWER node id"],
    ("14-roofline", "sum_not_max.py"): ["maximum"],
    ("14-roofline", "kv_once.py"): ["scale with the batch"],
    ("15-confident-chain", "own_probability.py"): ["PRODUCT"],
    ("15-confident-chain", "drops_crossing.py"): ["still part of the chain"],
    ("01-tree-mask", "depth_limited.py"): ["only its 4 nearest ancestors", "EVERY ancestor"],
    ("01-tree-mask", "fixed_hops.py"): ["only its 14 nearest ancestors", "no fixed number of parent hops"],
    ("01-tree-mask", "mutates_parents.py"): ["modified the caller's `parents`", "list(parents)"],
    ("02-depths-positions", "depth_table.py"): ["stop growing at 4", "however deep"],
    ("02-depths-positions", "fixed_hops.py"): ["stop growing at 14", "no fixed number of parent hops"],
    ("02-depths-positions", "mutates_parents.py"): ["modified the caller's `parents`"],
    ("03-accept-path", "four_steps.py"): ["stopped 4 levels down", "however deep"],
    ("03-accept-path", "mutates_logits.py"): ["modified the caller's `target_logits`", "target_logits.clone()"],
    ("04-tree-size", "default_batch.py"): ["default to 1"],
    ("04-tree-size", "first_level_start.py"): ["Case 7 of 12 ('[] at batch 1') raised", "cases 1-6 passed", "IndexError"],
    ("04-tree-size", "mutates_branching.py"): ["modified the caller's `branching`"],
    ("05-residual", "float32_cast.py"): ["dtype", "float64"],
    ("05-residual", "mutates_target.py"): ["modified the caller's `target_probs`"],
    ("05-residual", "flat_view.py"): ["dims 0 and 1 swapped in memory", "any strides", "`.reshape`"],
    ("06-chain-rejection", "accept_when_greater.py"): ["deterministically", "min(1, target / draft)"],
    ("06-chain-rejection", "global_rng.py"): ["same `generator` seed", "reseeded differently"],
    ("06-chain-rejection", "python_random.py"): ["same `generator` seed", "Python's `random`"],
    ("06-chain-rejection", "own_generator.py"): ["same `generator` seed", "draw every random number from `generator`"],
    ("06-chain-rejection", "loop_variable_bonus.py"): ["Case 3 of 4 ('no drafts (k = 0)') raised", "UnboundLocalError"],
    ("06-chain-rejection", "mutates_target.py"): ["modified the caller's `target_probs`"],
    ("07-tree-rejection", "residual_original_q.py"): ["ORIGINAL draft_probs[node]", "current q"],
    ("07-tree-rejection", "global_rng.py"): ["same `generator` seed", "reseeded differently"],
    ("07-tree-rejection", "two_levels.py"): ["accepted lengths of the chain"],
    ("08-speedup-math", "near_one.py"): ["close to 1", "alpha == 1 exactly"],
    ("09-compact-path", "first_row_only.py"): ["only batch row 0"],
    ("09-compact-path", "mutates_path.py"): ["modified the caller's `path`"],
    ("09-compact-path", "cpu_index_copy.py"): ["the cache on the `meta` device", "index_copy",
                                               "build every tensor on the inputs' device"],
    ("10-tree-forward", "cpu_inputs.py"): ["the `meta` device", "build every tensor on the inputs' device"],
    ("10-tree-forward", "fixed_cache.py"): ["Case 10 of 11 ('six-node tree after a 150-token prefix') raised",
                                            "KV cache overflow"],
    ("10-tree-forward", "mutates_prefix.py"): ["modified the caller's `prefix`"],
    ("11-draft-tree", "pops_branching.py"): ["modified the caller's `branching`"],
    ("11-draft-tree", "root_call_first.py"): ["drafter calls (one per level): got 1, expected 0"],
    ("12-ngram-proposer", "string_match.py"): ["whole tokens"],
    ("12-ngram-proposer", "window_64.py"): ["last 64 tokens"],
    ("12-ngram-proposer", "clamps_n.py"): ["shortened to fit a short context", "no fallback"],
    ("12-ngram-proposer", "reverses_context.py"): ["modified the caller's `context`"],
    ("13-eagle2-tree", "frontier_by_id.py"): ["node-id order", "highest cumulative score first"],
    ("13-eagle2-tree", "topk_tie_order.py"): ["token-id order", "stable=True"],
    ("13-eagle2-tree", "rerank_tail_slice.py"): ["expected [-1]"],
    ("14-roofline", "two_bytes_per_param.py"): ["2 bytes per parameter", "weight_bytes"],
    ("14-roofline", "mutates_hw.py"): ["modified the caller's `hw`", "dict(hw)"],
    ("15-confident-chain", "stops_at_theta.py"): ["q == theta", "strictly below"],
    ("15-confident-chain", "extends_context.py"): ["modified the caller's `context`"],
    ("07-tree-rejection", "contiguous_children.py"): ["accepted lengths of the non-BFS tree",
                                                      "parents[i] == node", "Re-run the tree", "expected 300.0, yours 0",
                                                      "Node 3 is a child of the root"],
    ("09-compact-path", "lengths_one_row.py"): ["cache.lengths = [10] (1 row(s)) on a cache of 2 batch rows",
                                                "Rule: cache.length = start + len(path)"],
    ("11-draft-tree", "rank_major.py"): ["rank-major", "frontier-major", "Rule: new nodes frontier-major"],
    ("12-ngram-proposer", "window_512.py"): ["a fixed number of tokens", "998 tokens"],
    ("15-confident-chain", "float32_log_space.py"): ["q == theta", "float32 sum of log-probs"],
}

# per exercise, the wrong files that show (mutated input, edge case, boundary or reproducibility) failing with a
# pointed message (POINTED). None: 08 and 13 take only numbers, strings and a function, nothing to mutate
# (test_exercises_without_a_mutation_variant_take_nothing_mutable); 01, 02, 09-11 and 14 state no boundary.
VARIANTS = {
    "01-tree-mask": ("mutates_parents.py", "depth_limited.py", None),
    "02-depths-positions": ("mutates_parents.py", "depth_table.py", None),
    "03-accept-path": ("mutates_logits.py", "four_steps.py", "last_duplicate.py"),
    "04-tree-size": ("mutates_branching.py", "first_level_start.py", "default_batch.py"),
    "05-residual": ("mutates_target.py", "float32_cast.py", "nan_on_degenerate.py"),
    "06-chain-rejection": ("mutates_target.py", "loop_variable_bonus.py", "global_rng.py"),
    "07-tree-rejection": ("mutates_draft.py", "two_levels.py", "global_rng.py"),
    "08-speedup-math": (None, "near_one.py", "alpha_one_crash.py"),
    "09-compact-path": ("mutates_path.py", "first_row_only.py", None),
    "10-tree-forward": ("mutates_prefix.py", "fixed_cache.py", None),
    "11-draft-tree": ("pops_branching.py", "root_call_first.py", None),
    "12-ngram-proposer": ("reverses_context.py", "window_64.py", "string_match.py"),
    "13-eagle2-tree": (None, "rerank_tail_slice.py", "topk_tie_order.py"),
    "14-roofline": ("mutates_hw.py", "two_bytes_per_param.py", None),
    "15-confident-chain": ("extends_context.py", "drops_crossing.py", "stops_at_theta.py"),
}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return judge_env(tmp_path_factory, "judge")


@pytest.fixture(scope="module")
def check_output(env):
    code, out = judge(*env["opts"], "check")
    return code, out


def test_record_writes_metadata_for_every_exercise(env):
    refs = env["root"] / "references"
    (refs / "04-tree-size.json").unlink()
    code, out = judge(*env["opts"], "record", "--stale")
    assert code == 0, out
    assert "04-tree-size" in out and "01-tree-mask" not in out
    assert "Recording the references on CPU (no CUDA GPU here)." in out or "cuda" in out
    assert sorted(p.stem for p in refs.glob("*.json")) == [ex.name for ex in EXERCISES]
    meta = (refs / "10-tree-forward.json").read_text()
    for key in ("device_name", "dtype", "torch", "cuda", "date", "model_sha256", "data_sha256", "solution_seconds"):
        assert key in meta
    assert '"dtype": "float32"' in meta  # measured from the model's parameters


def test_at_least_twelve_exercises_each_complete():
    assert len(EXERCISES) >= 12
    for ex in EXERCISES:
        for name in ("README.md", "starter.py", "solution.py", "cases.py"):
            assert (ex.folder / name).exists(), f"{ex.name} lacks {name}"
        assert ex.wrong_files(), f"{ex.name} has no wrong/*.py"
        assert len(ex.hints()) >= 2, f"{ex.name}: README needs a numbered '## Hints' section"


def test_check_passes_every_solution_and_fails_every_starter_and_wrong_file(check_output):
    code, out = check_output
    assert code == 0, out
    assert re.search(r"check: (\d+)/\1 as expected", out)


@pytest.mark.parametrize("exercise, wrong", sorted(POINTED))
def test_wrong_solution_fails_with_a_pointed_message(check_output, exercise, wrong):
    line = next((row for row in check_output[1].splitlines() if exercise in row and f"wrong/{wrong}" in row), None)
    assert line is not None, f"{exercise}/wrong/{wrong} not in the check output"
    assert line.lstrip().startswith("ok"), line
    for word in POINTED[exercise, wrong]:
        assert word in line, f"diagnosis of {exercise}/wrong/{wrong} should mention {word!r}: {line}"


def test_every_wrong_files_message_names_a_rule(check_output):
    """The diagnosis `check` prints for every shipped wrong file names the README rule it breaks (a failing case's
    'Rule: ...', the rule of the case an exception stopped in, or a check's own 'The rule: ...')."""
    lines = [row for row in check_output[1].splitlines() if "wrong/" in row]
    assert lines and len(lines) == sum(len(ex.wrong_files()) for ex in EXERCISES)
    for line in lines:
        assert re.search(r"\b[Rr]ules?( this case checks)?: ", line), f"names no rule: {line}"


def test_a_statistical_failure_shows_a_seeded_input_with_expected_and_observed_counts(check_output):
    for wrong in ("no_renorm.py", "contiguous_children.py", "no_q_update.py"):
        line = next(row for row in check_output[1].splitlines() if f"wrong/{wrong}" in row)
        assert "Re-run" not in line or re.search(r"manual_seed\(\d+\); over 1000 calls .* expected [\d.]+, yours \d+",
                                                  line), line
    line = next(row for row in check_output[1].splitlines() if "wrong/contiguous_children.py" in row)
    assert "Likely mistake" not in line and "only the first child" not in line, line


def test_every_wrong_file_has_a_pointed_message_test():
    files = {(ex.name, path.name) for ex in EXERCISES for path in ex.wrong_files()}
    assert files == set(POINTED)


def test_every_exercise_has_mutation_edge_and_boundary_variants():
    assert set(VARIANTS) == {ex.name for ex in EXERCISES}
    for name, (mutated, edge, boundary) in VARIANTS.items():
        for wrong in filter(None, (mutated, edge, boundary)):
            assert (name, wrong) in POINTED, f"{name}/wrong/{wrong}"
        assert edge is not None
        if mutated:
            assert any("modified the caller's" in word for word in POINTED[name, mutated]), name
    for ex in EXERCISES:
        for path in ex.wrong_files():
            first = (path.read_text().splitlines() or [""])[0]
            assert re.fullmatch(r'""".{10,}"""', first), f"{path}: open with a one-line docstring naming the mistake"


def test_exercises_without_a_mutation_variant_take_nothing_mutable():
    from practice.judgekit.grading import cases_module
    from practice.judgekit.spec import Context

    for name in (n for n, (mutated, _, _) in VARIANTS.items() if mutated is None):
        cases = cases_module(next(ex for ex in EXERCISES if ex.name == name))
        for case in cases.cases(Context("cpu", REPO / "models" / "tiny-qwen3")):
            assert all(isinstance(v, (int, float, str)) for v in case.args.values()), (name, case.name)


def test_test_reports_reference_device_and_passes_a_solution(env):
    code, out = judge(*env["opts"], "test", "10", str(PRACTICE / "exercises/10-tree-forward/solution.py"))
    assert code == 0, out
    assert "reference recorded on " in out and "graded on " in out and "PASS" in out


def learner_file(env, name: str, text: str) -> Path:
    path = env["root"] / name
    path.write_text(text)
    return path


def test_syntax_error_verdict_shows_the_line_without_judge_traceback(env):
    path = learner_file(env, "syntax.py", "def tree_mask(parents)\n    return None\n")
    code, out = judge(*env["opts"], "test", "1", str(path))
    assert code == 1
    assert "SyntaxError in syntax.py, line 1" in out and "def tree_mask(parents)" in out
    assert "judgekit" not in out and "Traceback" not in out


def test_exception_verdict_shows_only_the_learners_frames(env):
    source = "def helper(b):\n    return b[10]\n\n\ndef tree_size(b, batch=1):\n    return helper(b)\n"
    path = learner_file(env, "boom.py", source)
    code, out = judge(*env["opts"], "test", "4", str(path))
    assert code == 1
    assert "IndexError: list index out of range" in out
    assert 'boom.py", line 2, in helper' in out and 'boom.py", line 6, in tree_size' in out
    assert "judgekit" not in out and "cases.py" not in out


def test_an_exception_in_case_i_of_n_says_which_case_and_what_passed_before(env):
    source = ("def expected_tokens(alpha, k):\n    if alpha == 0:\n        raise ValueError('no')\n"
              "    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)\n\n\n"
              "def speedup(alpha, k, c):\n    return expected_tokens(alpha, k) / (k * c + 1)\n\n\n"
              "def break_even_alpha(verify_overhead, k):\n    return verify_overhead / k\n")
    code, out = judge(*env["opts"], "test", "8", str(learner_file(env, "raises.py", source)))
    total = len(cases_of("08-speedup-math"))
    assert code == 1, out
    assert f"Case 3 of {total} ('expected_tokens(alpha=0.0, k=3)') raised an exception; cases 1-2 passed:" in out
    assert f"ERROR  (case 3 of {total} raised an exception; cases 1-2 passed)" in out
    assert "STOP expected_tokens(alpha=0.0, k=3)" in out and f"({total - 3} more case(s) not run)" in out
    assert "did not run through" not in out and "2/2 cases passed" not in out


def cases_of(name: str) -> list:
    from practice.judgekit.grading import cases_module
    from practice.judgekit.spec import Context

    return cases_module(next(ex for ex in EXERCISES if ex.name == name)).cases(Context("cpu", REPO / "models"))


def test_infinite_loop_is_stopped_by_the_timeout(env):
    path = learner_file(env, "loop.py", "def tree_size(b, batch=1):\n    while True:\n        pass\n")
    code, out = judge(*env["opts"], "--timeout", "3", "test", "4", str(path))
    assert code == 1
    assert "did not finish within 3 s" in out and "[2, 2, 1, 1] at batch 64" in out and "TIMEOUT" in out


def test_wrong_return_type_verdict(env):
    path = learner_file(env, "type.py", "def tree_mask(parents):\n    return [[True]]\n")
    code, out = judge(*env["opts"], "test", "1", str(path))
    assert code == 1
    assert "expected a Tensor of shape [5, 5] and dtype torch.bool, got a list" in out


def test_judge_never_modifies_the_learners_file(env):
    path = learner_file(env, "mine.py", (PRACTICE / "exercises/01-tree-mask/starter.py").read_text())
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    judge(*env["opts"], "test", "1", str(path))
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_stale_reference_is_reported_for_a_different_checkpoint(env, tmp_path):
    other = tmp_path / "other-model"
    shutil.copytree(env["root"] / "model", other)
    (other / "config.json").write_text((other / "config.json").read_text() + "\n")
    opts = [*env["opts"][:-1], str(other)]
    code, out = judge(*opts, "test", "10", str(PRACTICE / "exercises/10-tree-forward/solution.py"))
    assert code == 1
    assert "recorded for a different checkpoint" in out and "python practice/judge.py record" in out


def test_start_never_overwrites_existing_work(tmp_path):
    opts = ["--workspace", str(tmp_path)]
    code, out = judge(*opts, "start", "tree-mask")
    mine = tmp_path / "01-tree-mask.py"
    assert code == 0 and mine.read_text() == (PRACTICE / "exercises/01-tree-mask/starter.py").read_text()
    assert "def tree_mask" in out
    mine.write_text("my work\n")
    code, out = judge(*opts, "start", "1")
    assert mine.read_text() == "my work\n"
    assert "already exists: keeping your work" in out


def test_hints_are_progressive(tmp_path):
    opts = ["--workspace", str(tmp_path)]
    total = len(EXERCISES[0].hints())
    outputs = [judge(*opts, "hint", "1")[1] for _ in range(total + 1)]
    assert "Hint 1/" in outputs[0] and "Hint 2/" not in outputs[0]
    assert "Hint 2/" in outputs[1] and "Hint 3/" not in outputs[1]
    assert f"Hint {total}/{total}" in outputs[-1] and "last hint" in outputs[-1]


def test_solution_is_shown_only_after_a_pass_or_with_force(env):
    opts = ["--workspace", str(env["root"] / "gating")] + env["opts"][2:]
    code, out = judge(*opts, "solution", "4")
    assert code == 1 and "Pass exercise 4 first" in out
    code, out = judge(*opts, "solution", "4", "--force")
    assert code == 0 and "def tree_size" in out
    assert judge(*opts, "test", "4", str(PRACTICE / "exercises/04-tree-size/solution.py"))[0] == 0
    code, out = judge(*opts, "solution", "4")
    assert code == 0 and "def tree_size" in out
    code, out = judge(*opts, "list")  # another file passed: the workspace has no file of exercise 4
    assert "tree-size              elsewhere" in out and f"0/{len(EXERCISES)} solved" in out, out
    (env["root"] / "gating" / "04-tree-size.py").write_text((PRACTICE / "exercises/04-tree-size/solution.py").read_text())
    code, out = judge(*opts, "list")  # the same content as the file that passed
    assert "tree-size              solved" in out and f"1/{len(EXERCISES)} solved" in out, out


def test_no_subcommand_starts_the_next_unsolved_exercise(tmp_path):
    code, out = judge("--workspace", str(tmp_path))
    assert code == 0 and "Next unsolved exercise: 1" in out
    assert (tmp_path / "01-tree-mask.py").exists()


def test_unknown_exercise_lists_the_choices(tmp_path):
    code, out = judge("--workspace", str(tmp_path), "start", "99")
    assert code == 2 and "tree-mask" in out


def test_doctor_and_cli_entry_point(env):
    proc = subprocess.run([sys.executable, str(PRACTICE / "judge.py"), *env["opts"], "doctor"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "torch" in proc.stdout and "gradable" in proc.stdout
