"""`python -m tree_spec.bench --quick` on random checkpoints: every method runs, greedy ones match plain
greedy, missing heads are listed as skipped, and the Markdown / JSON / PNG outputs are written."""
import json

import pytest
import torch

from tree_spec.bench import main
from tree_spec.head_io import save_head
from tree_spec.heads import make_head
from tests.spec_models import checkpoint_with_tokenizer, random_model


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    target = checkpoint_with_tokenizer(root / "target", seed=0)
    checkpoint_with_tokenizer(root / "draft", seed=0, std=0.5)
    torch.manual_seed(0)
    cfg = random_model(vocab_size=4096).cfg
    save_head(make_head("eagle", cfg), root / "heads" / "eagle")  # untrained: identity must still hold
    save_head(make_head("medusa", cfg), root / "heads" / "medusa")
    return root, target


def test_bench_quick_greedy(folders):
    root, target = folders
    result = main(["--target", str(target), "--draft", str(root / "draft"), "--heads", str(root / "heads"),
                   "--quick", "--out", str(root / "out")])
    names = [r["method"] for r in result["rows"]]
    assert names[0] == "plain greedy (mini_llm)" and "EAGLE-2" in names and "transformers assisted" in names
    skipped = result["skipped"]
    assert any(s.startswith("EAGLE-3") for s in skipped) and any(s.startswith("MTP") for s in skipped)
    assert all(r["identical"] == result["prompts"] for r in result["rows"])
    assert result["rows"][0]["tau"] == 1.0 and all(r["ms_per_token"] > 0 for r in result["rows"])
    for name in ("BENCHMARK.md", "benchmark.json", "benchmark.png"):
        assert (root / "out" / name).is_file()
    assert json.loads((root / "out" / "benchmark.json").read_text())["rows"] == result["rows"]


def test_bench_quick_sampling(folders):
    root, target = folders
    result = main(["--target", str(target), "--draft", "none", "--heads", str(root / "heads"), "--quick",
                   "--no-transformers", "--temperature", "1.0", "--out", str(root / "out")])
    assert (root / "out" / "BENCHMARK_T1.md").is_file()
    assert all(r["tokens"] == 2 * 16 for r in result["rows"])
    assert all(r["tau"] >= 1.0 for r in result["rows"])
