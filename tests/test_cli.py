"""`python -m tree_spec`: the default run passes its rejection check; bad arguments exit 2 with one line."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tree_spec.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_run_and_pass() -> None:
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "tree_spec"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "vocab 32, alpha 0.75, k 4, seed 0" in out and "verify_chain x 20000" in out
    assert "-> PASS" in out and "2. Alpha sweep" in out and "3. Tree mask" in out
    assert "[2, 2, 1, 1] -> 14, [3, 3, 2] -> 30" in out
    assert elapsed < 60  # the course promises under a minute with the defaults


def test_small_run_prints_the_mask(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--vocab", "5", "--alpha", "1", "--k", "2", "--samples", "200", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "   1.00     3.000    0.000    3.000" in out  # alpha 1: every draft accepted, tau = k + 1
    rows = [line.split() for line in out.splitlines()]
    # node, token, parent, depth, position, mask row
    assert ["5", "barked", "2", "2", "7", "1", ".", "1", ".", ".", "1"] in rows


@pytest.mark.parametrize(
    "argv",
    [["--vocab", "1"], ["--alpha", "0"], ["--alpha", "1.5"], ["--k", "0"], ["--samples", "0"], ["--vocab", "x"],
     ["--seed", "1.5"], ["--bogus"]],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m tree_spec: error:")


def test_both_rates_are_printed_and_tau_is_one_plus_k_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--alpha", "0.7", "--k", "3", "--samples", "3000", "--seed", "1"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("measured: per-position"))
    alpha = float(line.split("per-position alpha ")[1].split()[0])
    ratio = float(line.split("acceptance ratio ")[1].split()[0])
    assert alpha == pytest.approx(0.7, abs=0.03) and ratio < alpha  # two different numbers, named apart
