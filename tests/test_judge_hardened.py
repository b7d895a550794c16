"""The judge against a learner who forges, breaks or floods: verdicts, references and limits.

Every learner file here runs in the judge's worker process; the verdict is made in this process.
References and the model are private copies (see test_judge.py), never the shipped files.
"""
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from practice.judgekit import cli
from tests.judge_support import judge, judge_env
from practice.judgekit.catalog import discover
from practice.judgekit.settings import PRACTICE, Settings

SOLUTION = PRACTICE / "exercises/04-tree-size/solution.py"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return judge_env(tmp_path_factory, "judge-hardened")


def learner_file(tmp_path: Path, text: str, name: str = "mine.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


WRONG_TREE_SIZE = "def tree_size(b, batch=1):\n    return 0\n"


def test_writing_pass_lines_into_the_results_file_does_not_forge_a_pass(env, tmp_path):
    forger = """import json, sys
from pathlib import Path
results = Path(sys.argv[2]) / "results.jsonl"
with open(results, "a") as f:
    for line in ({"id": 0, "status": "pass", "cases": []}, {"done": True}):
        f.write(json.dumps(line) + "\\n")
""" + WRONG_TREE_SIZE
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, forger)))
    assert code == 1 and "PASS" not in out, out


def test_forging_case_outputs_is_detected_as_tampering(env, tmp_path):
    forger = """import json, sys
from pathlib import Path
with open(Path(sys.argv[2]) / "results.jsonl", "a") as f:
    f.write(json.dumps({"case": "[2, 2, 1, 1] at batch 1", "output": [14, 14]}) + "\\n")
""" + WRONG_TREE_SIZE
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, forger)))
    assert code == 1 and "tampered" in out, out


def test_patching_the_comparison_torch_and_the_check_does_not_forge_a_pass(env, tmp_path):
    patcher = """import sys
import torch
import practice.judgekit.compare as compare
compare.tokens_mismatch = compare.int_mismatch = compare.tensor_mismatch = lambda *a, **k: None
torch.equal = lambda *a: True
torch.allclose = lambda *a, **k: True
for module in list(sys.modules.values()):
    if hasattr(module, "check") and hasattr(module, "MISTAKES"):
        module.check = lambda *a: None


def tree_mask(parents):
    return torch.zeros(len(parents), len(parents), dtype=torch.bool)
"""
    code, out = judge(*env["opts"], "test", "1", str(learner_file(tmp_path, patcher)))
    assert code == 1 and "FAIL" in out and "PASS" not in out, out


def test_changed_or_deleted_reference_is_reported_by_test_and_doctor(env, tmp_path):
    refs = tmp_path / "refs"
    shutil.copytree(env["root"] / "references", refs)
    opts = [*env["opts"][:2], "--references", str(refs), *env["opts"][4:]]
    pt = refs / "04-tree-size.pt"
    pt.write_bytes(pt.read_bytes() + b"\0")
    code, out = judge(*opts, "test", "4", str(SOLUTION))
    assert code == 1 and "REFERENCE CHANGED OR MISSING" in out and "was changed" in out, out
    assert "git checkout -- " in out and "python practice/judge.py record 04" in out
    code, out = judge(*opts, "doctor")
    assert code == 1 and "NOT GRADABLE (bad-reference)" in out, out
    pt.unlink()
    code, out = judge(*opts, "test", "4", str(SOLUTION))
    assert code == 1 and "is missing" in out, out
    code, out = judge(*opts, "record", "--stale")
    assert code == 0 and "04-tree-size" in out, out
    assert judge(*opts, "test", "4", str(SOLUTION))[0] == 0


def test_check_is_immune_to_a_wrong_file_that_mutates_the_model(env, tmp_path):
    exercises = tmp_path / "exercises"
    shutil.copytree(PRACTICE / "exercises/10-tree-forward", exercises / "10-tree-forward")
    (exercises / "10-tree-forward/wrong/aaa_mutates_model.py").write_text(
        "import torch\n\n\ndef tree_logits(model, prefix, tokens, parents):\n"
        "    with torch.no_grad():\n        for p in model.parameters():\n            p.mul_(0.5)\n"
        "    return torch.zeros(len(tokens), model.cfg.vocab_size)\n")
    root = env["root"]
    settings = Settings(exercises=exercises, references=root / "references", workspace=tmp_path / "ws",
                        model=str(root / "model"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.cmd_check(settings, discover(exercises))
    assert code == 0, out.getvalue()
    assert "aaa_mutates_model.py" in out.getvalue()


def test_out_of_memory_is_reported_as_such(env, tmp_path):
    hog = "import torch\n\n\ndef tree_size(b, batch=1):\n    return int(torch.ones(2**28).sum())\n"  # 1 GiB
    code, out = judge(*env["opts"], "--memory", "256", "test", "4", str(learner_file(tmp_path, hog)))
    assert code == 1 and "OUT OF MEMORY" in out and "256 MiB" in out, out


def torch_import_seconds() -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.monotonic() - start


def test_endless_loop_in_a_fast_exercise_is_stopped_after_the_scaled_limit(env, tmp_path):
    """Exercise 04 runs in milliseconds: its limit is the 10 s minimum, counted once torch is imported."""
    loop = "def tree_size(b, batch=1):\n    while True:\n        pass\n"
    start = time.monotonic()
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, loop)))
    wall = time.monotonic() - start
    assert code == 1 and "TIMEOUT" in out and "did not finish within 10 s" in out, out
    assert wall <= 15 + torch_import_seconds(), f"{wall:.1f} s"


def test_a_live_thread_does_not_hold_the_verdict(env, tmp_path):
    sleeper = ("import threading, time\nthreading.Thread(target=lambda: time.sleep(600)).start()\n"
               + SOLUTION.read_text())
    start = time.monotonic()
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, sleeper)))
    assert code == 0 and "PASS" in out, out
    assert time.monotonic() - start < 60


def test_printed_output_is_capped(env, tmp_path):
    # 20,000 lines per case, ~1 MB over the exercise's cases: far past the 64,000-byte cap, and far inside the
    # 10 s limit even on a loaded machine (200,000 lines per case once passed that limit under xdist)
    spam = "def tree_size(b, batch=1):\n    for i in range(20_000):\n        print('line', i)\n    return 0\n"
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, spam)))
    assert code == 1 and "TIMEOUT" not in out and "line 19999" in out and "bytes printed; the last 64,000 kept" in out, out
    assert len(out) < 20_000


@pytest.mark.parametrize("fork", ["1", "0"], ids=["forked", "fresh-interpreter"])
def test_each_file_runs_in_a_process_of_its_own(env, tmp_path, monkeypatch, fork):
    """Forked from the zygote (Linux's default) or a new interpreter (SPEC_JUDGE_FORK=0): the same verdicts,
    and nothing one file does to the imported modules reaches the next file."""
    monkeypatch.setenv("SPEC_JUDGE_FORK", fork)
    leak = ("import tree_spec\nassert not hasattr(tree_spec, 'left_by_an_earlier_file')\n"
            "tree_spec.left_by_an_earlier_file = True\n" + SOLUTION.read_text())
    for _ in range(2):
        code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, leak, "leak.py")))
        assert code == 0 and "PASS" in out, out
    spam_then_loop = ("def tree_size(b, batch=1):\n    for i in range(100_000):\n        print('line', i)\n"
                      "    while True:\n        pass\n")
    code, out = judge(*env["opts"], "--timeout", "3", "test", "4", str(learner_file(tmp_path, spam_then_loop)))
    assert code == 1 and "TIMEOUT" in out and "line 99999" in out and "bytes printed" in out, out
    exits = "import os\n\n\ndef tree_size(b, batch=1):\n    os._exit(3)\n"
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, exits, "exits.py")))
    assert code == 1 and "exit code 3" in out, out
    segfault = "import os, signal\n\n\ndef tree_size(b, batch=1):\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
    code, out = judge(*env["opts"], "test", "4", str(learner_file(tmp_path, segfault, "segfault.py")))
    assert code == 1 and "SIGSEGV" in out, out


def test_a_dead_zygote_neither_hangs_the_verdict_nor_the_next_file(env, tmp_path):
    """The process that forks the workers is killed (say by the system, out of memory) while a file runs:
    that file still gets a verdict at once, and the next file is graded by a new zygote."""
    from practice.judgekit import zygote
    from practice.judgekit.runner import Job, start

    if not zygote.SUPPORTED:
        pytest.skip("no zygote on this platform")
    ex = next(e for e in discover(PRACTICE / "exercises") if e.number == 4)
    settings = Settings(references=env["root"] / "references", model=str(env["root"] / "model"))
    loop = learner_file(tmp_path, "def tree_size(b, batch=1):\n    while True:\n        pass\n")
    worker = start(Job(ex, loop), settings, "grade", "cpu", 60)
    dead = zygote.shared()
    time.sleep(1)
    dead.proc.kill()
    began = time.monotonic()
    run = worker.wait()
    run.tmp.cleanup()
    assert time.monotonic() - began < 10 and run.ended == "exit" and run.returncode == -9
    code, out = judge(*env["opts"], "test", "4", str(SOLUTION))
    assert code == 0 and "PASS" in out, out
    assert zygote.shared() is not dead and zygote.shared().alive()


def test_a_mistake_is_named_only_when_it_explains_every_failing_case(env, tmp_path):
    """speedup alone lacks the bonus token: the 'no bonus' model also breaks expected_tokens, so no guess;
    when both lack it, the model explains every failing case and is named."""
    solution = (PRACTICE / "exercises/08-speedup-math/solution.py").read_text()
    speedup_only = solution + ("\n\ndef speedup(alpha, k, c):\n"
                               "    return (expected_tokens(alpha, k) - 1) / (k * c + 1)\n")
    code, out = judge(*env["opts"], "test", "8", str(learner_file(tmp_path, speedup_only)))
    assert code == 1 and "Likely mistake" not in out, out
    assert "Failing cases (the first 3 of 7):\n  speedup:\n    speedup(alpha=0.8" in out, out
    both = solution + "\n\n_right = expected_tokens\n\n\ndef expected_tokens(alpha, k):\n    return _right(alpha, k) - 1\n"
    code, out = judge(*env["opts"], "test", "8", str(learner_file(tmp_path, both, "both.py")))
    assert code == 1 and "Likely mistake: the target's own token" in out, out
    assert re.search(r"Failing cases \(the first 3 of \d+\):\n  expected_tokens:", out), out


def test_outputs_travel_without_pickle():
    import torch

    from practice.judgekit.wire import Opaque, decode, encode

    value = ([1, 2.5, None, "x"], (torch.arange(3, device="cpu"), {"a": torch.ones(2, dtype=torch.bool, device="cpu")}),
             object())
    tensors: dict = {}
    tree = encode(value, tensors)
    json.dumps(tree)  # plain JSON
    back = decode(tree, tensors)
    assert back[0] == [1, 2.5, None, "x"] and torch.equal(back[1][0], torch.arange(3, device="cpu"))
    assert back[1][1]["a"].dtype == torch.bool and isinstance(back[2], Opaque) and back[2].type_name == "object"


def test_worker_never_receives_the_references(env, tmp_path):
    """The worker's job names no reference data for grading; the parent alone reads the .pt."""
    from practice.judgekit.runner import Job, start

    ex = next(e for e in discover(PRACTICE / "exercises") if e.number == 4)
    settings = Settings(references=env["root"] / "references", model=str(env["root"] / "model"))
    run = start(Job(ex, SOLUTION), settings, "grade", "cpu", 60).wait()
    job = json.loads((run.outdir / "job.json").read_text())
    assert job["mode"] == "grade" and all("expected" not in json.dumps(e) for e in run.events)
    assert [e["case"] for e in run.events if "case" in e] and any("done" in e for e in run.events)
    run.tmp.cleanup()


def test_record_refuses_cuda_without_a_gpu(env):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: `record --device cuda` would record")
    code, out = judge(*env["opts"], "record", "--device", "cuda", "04")
    assert code == 1 and "no CUDA GPU" in out, out
