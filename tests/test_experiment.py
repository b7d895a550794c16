"""The multi-prompt experiment (tree_spec.analysis.experiment) and the compact KV-slot drawing (tree_spec.ui.plots)."""
import matplotlib

matplotlib.use("Agg")

from matplotlib.text import Annotation

from tests.spec_models import prompts, random_model
from tree_spec.analysis.experiment import REFERENCE, main, mean_spread, print_prompts_experiment, run_prompts_experiment
from tree_spec.ui.plots import draw_compact


def test_prompts_experiment_rows_are_per_prompt_and_greedy_identical(capsys):
    target = random_model()
    rows = run_prompts_experiment(target, prompts(target.cfg.vocab_size, 3), max_new_tokens=10)
    assert list(rows) == ["plain", "chain", "tree"]
    assert rows["plain"]["target_calls"] == [10, 10, 10] and rows["plain"]["tau"] == [1.0] * 3
    for name, nodes in (("chain", 4), ("tree", 14)):
        row = rows[name]
        assert row["identical"] and row["nodes"] == nodes
        assert len(row["target_calls"]) == len(row["tau"]) == len(row["ms_per_token"]) == 3
        assert all(abs(t - 10 / c) < 1e-12 for t, c in zip(row["tau"], row["target_calls"]))
        assert 0 <= row["acceptance_ratio"] <= row["alpha"] <= 1  # reached depths <= proposed nodes
    print_prompts_experiment(rows)
    out = capsys.readouterr().out
    assert "Qwen3-0.6B" in out and "23" in out and "2.45" in out and "over 3 prompts" in out



def test_command_prints_the_qwen3_reference_beside_each_shape(capsys):
    main(["--tokens", "6"])
    lines = capsys.readouterr().out.splitlines()
    for name, reference in REFERENCE.items():
        row = next(line for line in lines if line.startswith(name))
        assert row.split("|")[1].split() == [str(reference["target_calls"]), f"{reference['tau']:.2f}"]


def test_mean_spread():
    assert mean_spread([1.0, 3.0]) == "2.00 ± 1.41" and mean_spread([5.0]) == "5.00 ± 0.00"


def test_draw_compact_moves_each_kept_slot_once():
    labels = ["a", "b", "c", "d", "e", "f"]
    fig = draw_compact(labels, [0, 2, 5], start=10)
    ax = fig.axes[0]
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    assert len(arrows) == 3
    assert [(a.xy[0], a.xyann[0]) for a in arrows] == [(0, 0), (1, 2), (2, 5)]  # slot start+keep[j] -> start+j
    texts = [t.get_text() for t in ax.texts if not isinstance(t, Annotation)]
    assert texts.count("free") == 3 and "15" in texts and "cache.compact(10, [0, 2, 5])" in ax.get_title()
