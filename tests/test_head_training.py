"""Head training CLI: a few steps on a random target lower the loss, write the files, and the head loads
back to the held-out acceptance recorded at save time."""
import json

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec import tree_speculative_generate
from tree_spec.drafters.head_io import load_head, load_head_module
from tree_spec.analysis.prompts import held_out_prompts
from tree_spec.drafters.heads import make_head
from tree_spec.analysis.train_heads import evaluate, main, recurrent_loss, self_distill, ttt_mask
from tree_spec.analysis.train_logs import (
    compare_training_logs, continued_log, distinct_windows, training_runs, write_card,
)
from tests.spec_models import checkpoint_with_tokenizer, prompts as random_prompts, random_model


@pytest.fixture(scope="module")
def target_dir(tmp_path_factory):
    return checkpoint_with_tokenizer(tmp_path_factory.mktemp("target"), std=0.3)


def test_ttt_mask_matches_inference_visibility():
    # step 2, row 3: true pairs 0..2, its own step-2 key (index 3); step 3 row 3: true 0..1, step-2 at 2, step-3 at 3
    m2, m3 = ttt_mask(5, 2), ttt_mask(5, 3)
    assert m2[3].nonzero().flatten().tolist() == [0, 1, 2, 5 + 3]
    assert m3[3].nonzero().flatten().tolist() == [0, 1, 5 + 2, 10 + 3]
    assert ttt_mask(4, 1).equal(torch.ones(4, 4, dtype=torch.bool, device="cpu").tril())


def test_cls_weight_scales_only_the_eagle_token_loss():
    # EAGLE-1's loss = feature loss + cls_weight * CE: two weights give two losses whose difference is Δw * CE;
    # EAGLE-3 has no feature loss and ignores cls_weight
    target = random_model(seed=3)
    tokens = torch.tensor(random_prompts(target.cfg.vocab_size, 2, length=10), device="cpu")
    with torch.device("cpu"):
        eagle, eagle3 = make_head("eagle", target.cfg), make_head("eagle3", target.cfg)
    data = self_distill(target, tokens, 6, eagle3.feature_layers)
    with torch.no_grad():  # the losses' values only
        loss = {w: float(recurrent_loss(eagle, target, data.tokens, data.hidden, (), 1,
                                        torch.Generator().manual_seed(0), cls_weight=w)[0]) for w in (0.1, 1.1)}
        ce_only = float(recurrent_loss(eagle, target, data.tokens, data.hidden, (), 1, torch.Generator().manual_seed(0),
                                       cls_weight=1.0)[0]) - float(recurrent_loss(
            eagle, target, data.tokens, data.hidden, (), 1, torch.Generator().manual_seed(0), cls_weight=0.0)[0])
        a, b = (float(recurrent_loss(eagle3, target, data.tokens, data.hidden, data.layers, 3, cls_weight=w)[0])
                for w in (0.1, 5.0))
    assert ce_only > 0 and loss[1.1] - loss[0.1] == pytest.approx(ce_only, rel=1e-5)
    assert a == b


def test_evaluate_reports_both_rates_consistently():
    # chains of k drafts: alpha = accepted / reached, acceptance_ratio = accepted / proposed <= alpha, and
    # tau = 1 + (accepted per call), which ties tau to the ratio through the proposed count
    target = random_model(seed=1)
    with torch.device("cpu"):
        head = make_head("eagle", target.cfg)
    ps = random_prompts(target.cfg.vocab_size, 3, length=8)
    expected = [generate(target, torch.tensor([p], device="cpu"), 20)[0].tolist() for p in ps]
    got = evaluate(target, head, ps, expected, k=3)
    assert set(got) >= {"alpha", "alpha_at_depth", "acceptance_ratio", "acceptance_per_position", "tau"}
    assert 0 <= got["acceptance_ratio"] <= got["alpha"] <= 1
    assert got["alpha_at_depth"][0] == pytest.approx(got["acceptance_per_position"][0])  # depth 1 is always reached


def test_compare_training_logs_interpolates_at_equal_steps_and_time():
    def log(kind, steps, seconds, taus):
        evals = [{"step": s, "tau": t, "acceptance_per_position": [t - 1]} for s, t in zip(steps, taus)]
        return {"kind": kind, "steps": steps[-1], "train_seconds": seconds, "evals": evals}

    fast = log("eagle", [0, 100, 300], 60.0, [1.0, 2.0, 3.0])     # 0.2 s per step
    slow = log("eagle3", [0, 50, 100], 60.0, [1.0, 2.5, 3.0])     # 0.6 s per step
    rows = compare_training_logs(fast, slow).splitlines()
    assert rows[1].split()[2:] == ["eagle", "100", "0.3", "2.00", "1.00"]      # equal steps: the shorter run's 100
    assert rows[2].split()[2:] == ["eagle3", "100", "1.0", "3.00", "2.00"]
    assert rows[3].split()[2:] == ["eagle", "300", "1.0", "3.00", "2.00"]      # equal time: 60 s each
    assert "3.0x" in rows[-1]


def test_card_names_both_rates(tmp_path):
    final = {"acceptance_per_position": [0.6, 0.3], "alpha_at_depth": [0.6, 0.5], "alpha": 0.56,
             "acceptance_ratio": 0.45, "tau": 1.9}
    log = {"kind": "eagle", "target": "t", "head_params": 10, "batch": 2, "lr": 1e-3, "steps": 3, "epochs": 1.0,
           "train_seconds": 6.0, "hardware": "cpu", "command": "cmd", "eval": {"prompts": 2, "new_tokens": 8},
           "data": {"windows": 4, "prompt_len": 8, "gen_len": 8, "seconds": 1.0}, "evals": [final]}
    write_card(tmp_path, log)
    card = (tmp_path / "README.md").read_text()
    assert "Per-position acceptance rate α" in card and "α = 0.56 pooled; per depth [0.60, 0.50]" in card
    assert "Acceptance ratio (accepted / proposed" in card and "0.45" in card


def test_a_run_on_fresh_windows_counts_them_in_the_card(tmp_path):
    final = {"step": 1, "epoch": 1.0, "acceptance_per_position": [0.6], "alpha_at_depth": [0.6], "alpha": 0.6,
             "acceptance_ratio": 0.6, "tau": 1.6}

    def run(seed: int, steps: int) -> dict:
        """The log of one run of `steps` steps on 4 windows drawn with `seed`."""
        return {"kind": "mtp", "target": "t", "head_params": 10, "batch": 2, "lr": 1e-3, "steps": steps,
                "epochs": 1.0, "train_seconds": 6.0, "total_seconds": 7.0, "hardware": "cpu",
                "command": f"cmd --seed {seed}", "seed": seed, "eval": {"prompts": 2, "new_tokens": 8},
                "data": {"windows": 4, "prompt_len": 8, "gen_len": 8, "seconds": 1.0}, "losses": [], "evals": [final]}

    same = continued_log(run(0, 3), run(0, 2))
    assert [(r["seed"], r["windows"]) for r in training_runs(same)] == [(0, 4), (0, 4)]
    assert distinct_windows(training_runs(same)) == 4            # one seed, one count: the same windows twice
    fresh = continued_log(same, run(1, 2))
    assert distinct_windows(training_runs(fresh)) == 8
    write_card(tmp_path, fresh)
    card = (tmp_path / "README.md").read_text()
    assert "Data (self-distillation): 8 windows" in card and "4, 4, 4 per run, drawn with seeds 0, 0, 1" in card
    legacy = {k: v for k, v in run(0, 3).items() if k != "seed"}   # logged before the seed was: the default 0
    assert training_runs(legacy)[0]["seed"] == 0


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "medusa", "mtp"])
def test_few_steps_lower_the_loss_and_the_head_reloads(target_dir, tmp_path, kind):
    out = tmp_path / kind
    log = main(["--kind", kind, "--target", str(target_dir), "--out", str(out), "--steps", "12", "--windows", "8",
                "--batch", "8", "--prompt-len", "24", "--gen-len", "24", "--lr", "3e-3", "--eval-prompts", "2",
                "--eval-tokens", "12"])
    losses = [s["loss"] for s in log["losses"]]
    assert len(losses) == 12 and sum(losses[-3:]) < sum(losses[:3])
    for name in ("head.safetensors", "config.json", "README.md", "train_log.json", "acceptance.png"):
        assert (out / name).is_file()
    assert len(json.loads((out / "train_log.json").read_text())["evals"]) >= 2
    target = load_model(target_dir)
    recorded = json.loads((out / "config.json").read_text())["held_out"]
    prompts = held_out_prompts(load_tokenizer(target_dir), 2, chars=400)
    expected = [generate(target, torch.tensor([p], device="cpu"), 12)[0].tolist() for p in prompts]
    again = evaluate(target, load_head_module(out, target), prompts, expected, log["eval"]["k"])
    assert again["acceptance_per_position"] == pytest.approx(recorded["acceptance_per_position"])
    assert again["tau"] == pytest.approx(recorded["tau"])
    out_tree = tree_speculative_generate(target, load_head(out, target), prompts[0], 12, branching=[2, 1, 1])
    assert out_tree.tokens == expected[0]


def test_init_continues_a_trained_head_and_the_card_gives_both_commands(target_dir, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    common = ["--kind", "mtp", "--target", str(target_dir), "--windows", "8", "--batch", "8", "--prompt-len", "24",
              "--gen-len", "24", "--eval-prompts", "2", "--eval-tokens", "12"]
    main(common + ["--out", str(first), "--steps", "6", "--lr", "3e-3"])
    target = load_model(target_dir)
    start = load_head_module(first, target).state_dict()
    # one AdamW step at rate 1e-7 moves a weight by about 1e-7: a continued head stays within 1e-5 of its start,
    # while the same step from the seed's fresh head lands as far from it as the first run's 6 steps at 3e-3 went
    log = main(common + ["--out", str(second), "--steps", "1", "--lr", "1e-7", "--init", str(first)])
    fresh = main(common + ["--out", str(tmp_path / "fresh"), "--steps", "1", "--lr", "1e-7"])
    distance = lambda folder: max(float((load_head_module(folder, target).state_dict()[k] - start[k]).abs().max())
                                  for k in start)
    assert distance(second) < 1e-5 and distance(tmp_path / "fresh") > 1e-3
    assert "runs" not in fresh
    earlier = json.loads((first / "train_log.json").read_text())
    # one training in the log: steps, evaluations and losses continue the first run's (notebook 03 reads the budget)
    assert log["steps"] == 7 and [e["step"] for e in log["evals"]] == [e["step"] for e in earlier["evals"]] + [7]
    assert [s["step"] for s in log["losses"]] == list(range(1, 8)) and log["epochs"] == earlier["epochs"] + 1
    assert [(r["command"], r["steps"], r["lr"]) for r in log["runs"]] == [(earlier["command"], 6, 3e-3),
                                                                          (log["command"], 1, 1e-7)]
    card = (second / "README.md").read_text()
    assert "Training: 7 steps" in card and "6 steps at lr 0.003" in card and "then 1 steps at lr 1e-07" in card
    assert f"Reproduce: `{earlier['command']}`, then `{log['command']}`" in card
    with pytest.raises(ValueError, match="holds a mtp head"):
        main(common + ["--kind", "eagle", "--out", str(tmp_path / "x"), "--steps", "1", "--init", str(first)])


def test_a_folder_that_holds_files_is_not_overwritten_without_force(tmp_path, capsys):
    out = tmp_path / "shipped"
    out.mkdir()
    (out / "head.safetensors").write_bytes(b"shipped")
    with pytest.raises(SystemExit):
        main(["--kind", "eagle", "--out", str(out), "--steps", "1"])
    assert "--force" in capsys.readouterr().err and (out / "head.safetensors").read_bytes() == b"shipped"
