"""`python -m tree_spec.tools.bench --quick` on random checkpoints, on the CPU and (skipped without one) on CUDA: every
method runs, greedy ones match plain greedy, missing heads are listed as skipped, the Markdown / JSON / PNG outputs
are written and name the device's clock; `--batch` writes its table."""
import json
import subprocess
import sys

import pytest
import torch

from tree_spec.tools.bench import main
from tree_spec.tools.bench_report import markdown
from tree_spec.analysis.clocks import clock_name
from tree_spec.drafters.head_io import save_head
from tree_spec.drafters.heads import make_head
from tests.conftest import REPO
from tests.spec_models import checkpoint_with_tokenizer, random_model
from tests.test_devices import DEVICES


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    target = checkpoint_with_tokenizer(root / "target", seed=0)
    checkpoint_with_tokenizer(root / "draft", seed=0, std=0.5)
    torch.manual_seed(0)
    cfg = random_model(vocab_size=4096).cfg
    with torch.device("cpu"):
        eagle, medusa = make_head("eagle", cfg), make_head("medusa", cfg)
    save_head(eagle, root / "heads" / "eagle")  # untrained: identity must still hold
    save_head(medusa, root / "heads" / "medusa")
    (root / "tuned").mkdir()
    for name, branching in (("eagle", [2, 1]), ("medusa", [1, 1]), ("int4-self", [2, 2, 1, 1])):  # as tree_spec.tools.tune
        (root / "tuned" / f"{name}.json").write_text(json.dumps(
            {"drafter": name, "target": str(target), "branching": branching, "draft_vocab": None}))
    return root, target


@pytest.mark.parametrize("device", DEVICES)
def test_bench_quick_greedy(folders, device):
    root, target = folders
    out = root / f"out-{device}"
    result = main(["--target", str(target), "--draft", str(root / "draft"), "--heads", str(root / "heads"),
                   "--tuned", str(root / "tuned"), "--quick", "--device", device, "--out", str(out)])
    assert result["device"].startswith(device) and result["clock"] == clock_name(device)
    names = [r["method"] for r in result["rows"]]
    forms = {r["method"]: r["form"] for r in result["rows"]}
    # tuned shapes run beside the fixed ones; a chain-shaped tuned file runs as a chain
    assert forms["EAGLE-1 (tuned)"] == "tree [2, 1] (tuned)" and forms["Medusa heads (tuned)"] == "chain k=2 (tuned)"
    assert not any("shape row" in f and m.startswith("EAGLE-1") for m, f in forms.items())
    # a tuned shape equal to a fixed row's is that row, not a second run of the same configuration
    assert forms["quantized self (INT4)"] == "tree [2, 2, 1, 1] (= tuned)" and "quantized self (INT4) (tuned)" not in forms
    text = (out / "BENCHMARK.md").read_text()
    assert "- EAGLE-1: " not in text and "- EAGLE-1 (tuned): tree [2, 1] (tuned)" in text and "Fastest model-based" in text
    assert names[0] == "plain greedy (mini_llm)" and "EAGLE-2" in names and "transformers assisted" in names
    skipped = result["skipped"]
    assert any(s.startswith("EAGLE-3") for s in skipped) and any(s.startswith("MTP") for s in skipped)
    assert all(r["identical"] == result["prompts"] for r in result["rows"])
    assert result["rows"][0]["tau"] == 1.0 and all(r["ms_per_token"] > 0 for r in result["rows"])
    for r in result["rows"]:  # both rates, named apart; a chain's τ per pass is 1 + k · ratio
        if r["acceptance_ratio"] is not None:
            assert 0 <= r["acceptance_ratio"] <= r["alpha"] <= 1
    # every mini_llm method has a reconciliation row whose prediction uses the in-run cost curve
    recon = {r["method"] + r["form"]: r["reconciliation"] for r in result["rows"]}
    assert all(v is not None for k, v in recon.items() if not k.startswith("transformers"))
    assert all(recon[k] is None for k in recon if k.startswith("transformers"))
    plain = result["rows"][0]["reconciliation"]
    assert plain["predicted_tau"] == 1.0 and plain["nodes_per_pass"] == 1.0 and plain["draft_ms_per_pass"] == 0.0
    for k, c in recon.items():
        if c is not None and "chain" not in k:  # trees: τ̂ = 1 + Σ per-depth acceptance = tokens per pass
            assert c["predicted_tau"] == pytest.approx(c["measured_tau_per_pass"])
    curve = result["cost_curve"]
    assert curve["threads"] == 1 and curve["new_tokens"][0] == 1
    assert curve["method"].startswith("CUDA wall time" if device == "cuda" else "thread CPU time")
    text = (out / "BENCHMARK.md").read_text()
    assert "## Reconciliation" in text and "acceptance ratio" in text and "per-position" in text
    assert f"ms/token = {clock_name(device)} / tokens" in text
    for name in ("BENCHMARK.md", "benchmark.json", "benchmark.png"):
        assert (out / name).is_file()
    assert json.loads((out / "benchmark.json").read_text())["rows"] == result["rows"]
    assert result["draft_vocab_coverage"] == []  # no drafter here has a reduced vocabulary
    shown = markdown({**result, "draft_vocab_coverage": [dict(size=1024, coverage=0.875)]})
    assert "1024 tokens cover 87.5% of the tokens plain decoding wrote" in shown


@pytest.mark.parametrize("device", DEVICES)
def test_bench_quick_sampling(folders, device):
    """Temperature 1.0: every method samples with a generator on the device."""
    root, target = folders
    out = root / f"out-t1-{device}"
    result = main(["--target", str(target), "--draft", "none", "--heads", str(root / "heads"), "--quick",
                   "--no-transformers", "--temperature", "1.0", "--device", device, "--out", str(out)])
    assert (out / "BENCHMARK_T1.md").is_file() and result["clock"] == clock_name(device)
    assert all(r["tokens"] == 1 * 16 for r in result["rows"])  # --quick: 1 prompt x 16 tokens
    assert all(r["tau"] >= 1.0 for r in result["rows"])


@pytest.mark.parametrize("device", DEVICES)
def test_bench_cli_main_table_and_batch_on_the_device(folders, device, tmp_path):
    """`python -m tree_spec.tools.bench --quick --device D --no-transformers` and `--batch 1,2 --device D`."""
    root, target = folders
    common = ["--target", str(target), "--draft", str(root / "draft"), "--quick", "--device", device]
    for extra in (["--heads", str(root / "heads"), "--tuned", "none", "--no-transformers"], ["--batch", "1,2"]):
        run = subprocess.run([sys.executable, "-m", "tree_spec.tools.bench", *common, *extra, "--out", str(tmp_path)],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
    table = (tmp_path / "BENCHMARK.md").read_text()
    assert f"ms/token = {clock_name(device)} / tokens" in table and f"(device {device}" in table
    assert json.loads((tmp_path / "benchmark.json").read_text())["device"].startswith(device)
    batch = (tmp_path / "BENCHMARK_BATCH.md").read_text()
    assert clock_name(device) in batch and f"--device {device}`" in batch
    assert "| n-gram | 2 |" in batch and "| NO |" not in batch  # every batched row equals plain greedy
    assert "Plain `generate_batch` tokens/s over its tokens/s at B = 1" in batch and "B = 2: " in batch


def test_bench_refuses_cuda_without_a_gpu(folders, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --device cuda would run")
    root, target = folders
    with pytest.raises(SystemExit) as exit_info:
        main(["--target", str(target), "--quick", "--device", "cuda", "--out", str(root / "never")])
    assert exit_info.value.code == 2 and "no CUDA GPU" in capsys.readouterr().err
    assert not (root / "never").exists()
