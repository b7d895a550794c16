"""Head training CLI: a few steps on a random target lower the loss, write the files, and the head loads
back to the held-out acceptance recorded at save time."""
import json

import pytest
import torch

from mini_llm import generate, load_model, load_tokenizer
from tree_spec import tree_speculative_generate
from tree_spec.head_io import load_head, load_head_module
from tree_spec.prompts import held_out_prompts
from tree_spec.train_heads import evaluate, main, ttt_mask
from tests.spec_models import checkpoint_with_tokenizer


@pytest.fixture(scope="module")
def target_dir(tmp_path_factory):
    return checkpoint_with_tokenizer(tmp_path_factory.mktemp("target"), std=0.3)


def test_ttt_mask_matches_inference_visibility():
    # step 2, row 3: true pairs 0..2, its own step-2 key (index 3); step 3 row 3: true 0..1, step-2 at 2, step-3 at 3
    m2, m3 = ttt_mask(5, 2), ttt_mask(5, 3)
    assert m2[3].nonzero().flatten().tolist() == [0, 1, 2, 5 + 3]
    assert m3[3].nonzero().flatten().tolist() == [0, 1, 5 + 2, 10 + 3]
    assert ttt_mask(4, 1).equal(torch.ones(4, 4, dtype=torch.bool).tril())


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
    expected = [generate(target, torch.tensor([p]), 12)[0].tolist() for p in prompts]
    again = evaluate(target, load_head_module(out, target), prompts, expected, log["eval"]["k"])
    assert again["acceptance_per_position"] == pytest.approx(recorded["acceptance_per_position"])
    assert again["tau"] == pytest.approx(recorded["tau"])
    out_tree = tree_speculative_generate(target, load_head(out, target), prompts[0], 12, branching=[2, 1, 1])
    assert out_tree.tokens == expected[0]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("kind", ["eagle3", "medusa"])
def test_head_trains_on_cuda(target_dir, tmp_path, kind):
    log = main(["--kind", kind, "--target", str(target_dir), "--out", str(tmp_path / kind), "--steps", "4",
                "--windows", "8", "--batch", "8", "--prompt-len", "24", "--gen-len", "24", "--eval-prompts", "2",
                "--eval-tokens", "12", "--device", "cuda"])
    assert len(log["losses"]) == 4 and (tmp_path / kind / "head.safetensors").is_file()
