"""scripts/gpu_check.sh --dry-run: every step of the GPU pass goes through its code path on the CPU."""
import os
import subprocess

import pytest

from tests.conftest import REPO

STEPS = ["env", "cuda_tests", "notebooks", "judge_record", "bench_greedy", "bench_t1", "bench_graphs", "fast_suite"]


@pytest.mark.slow
def test_gpu_check_dry_run_runs_every_step(tmp_path):
    out = tmp_path / "gpu"
    env = {k: v for k, v in os.environ.items() if k != "MINI_LLM_TEST_DEVICE"}
    run = subprocess.run(["bash", "scripts/gpu_check.sh", "--dry-run", "--out", str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=1500)
    summary = (out / "summary.md").read_text()
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in summary.splitlines()
            if line.startswith("| ") and not line.startswith("| step")}
    assert list(rows) == STEPS, summary
    failed = {name: (out / "logs" / f"{name}.log").read_text()[-2000:] for name, status in rows.items() if status != "ok"}
    assert not failed and run.returncode == 0, f"{summary}\n{failed}"
    # each step left its results in the one output folder
    assert "cuda available: False" in (out / "env.txt").read_text()
    assert (out / "fast_suite.xml").exists()
    assert [p.name[:2] for p in (out / "notebooks").glob("*.ipynb")] == ["00"]
    assert "DEVICE = 'cpu'" in (out / "notebooks" / next((out / "notebooks").glob("*.ipynb")).name).read_text()
    assert (out / "references" / "01-tree-mask.json").exists()
    assert {"BENCHMARK.md", "BENCHMARK_T1.md", "BENCHMARK_GRAPHS.md"} <= {p.name for p in (out / "bench").iterdir()}


def test_gpu_check_refuses_to_run_without_a_gpu_unless_dry(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the real run would start")
    run = subprocess.run(["bash", "scripts/gpu_check.sh", "--out", str(tmp_path / "x")], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "--dry-run" in run.stderr
    assert not (tmp_path / "x").exists()
