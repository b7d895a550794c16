"""Parent side: start the worker subprocess, enforce the per-file timeout, collect one result per job."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import Exercise
from .settings import REPO, Settings

STARTUP_S = 300.0


@dataclass
class Job:
    exercise: Exercise
    file: Path | None  # None when recording


def _read_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def run_jobs(jobs: list[Job], settings: Settings, mode: str = "grade", device: str | None = None) -> list[dict[str, Any]]:
    """Grade (or record) every job in as few worker processes as possible -> one result dict per job.

    Each job may run `settings.timeout_s` seconds; on a timeout the worker is killed, that job gets
    status 'timeout' (naming the case that was running) and a fresh worker continues with the rest.
    """
    results: list[dict[str, Any]] = []
    while len(results) < len(jobs):
        results += _run_batch(jobs[len(results):], settings, mode, device or settings.device)
    return results


def _run_batch(jobs: list[Job], settings: Settings, mode: str, device: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="spec-judge-") as tmp:
        jobs_file, results_file = Path(tmp) / "jobs.json", Path(tmp) / "results.jsonl"
        jobs_file.write_text(json.dumps({
            "mode": mode, "device": device, "model_path": str(settings.model_path().resolve()),
            "references": str(settings.references.resolve()), "threads": os.environ.get("OMP_NUM_THREADS", "1"),
            "jobs": [{"id": i, "exercise": str(j.exercise.folder), "file": str(j.file.resolve()) if j.file else None}
                     for i, j in enumerate(jobs)],
        }))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        with open(Path(tmp) / "output.txt", "w+") as output:
            proc = subprocess.Popen(
                [sys.executable, "-m", "practice.judgekit.worker", str(jobs_file), str(results_file)],
                cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )
            timed_out = _wait(proc, results_file, settings.timeout_s)
            output.seek(0)
            printed = output.read()
        lines = _read_lines(results_file)
    done = [r for r in lines if "id" in r]
    if len(done) == len(jobs):
        if len(jobs) == 1:
            done[0]["printed"] = printed
        return done
    running = [r["case"] for r in lines if r.get("progress") == len(done)]
    case = f" in case '{running[-1]}'" if running else ""
    if timed_out:
        detail = (f"your code did not finish within {settings.timeout_s:g} s{case} and was stopped: "
                  f"look for a loop that never ends (e.g. a while loop whose condition never changes).")
        status = "timeout"
    else:
        detail = f"the grading process stopped unexpectedly{case} (exit code {proc.returncode}):\n{printed[-2000:]}"
        status = "crash"
    return done + [{"id": len(done), "status": status, "detail": detail, "printed": printed}]


def _wait(proc: subprocess.Popen, results_file: Path, timeout_s: float) -> bool:
    """Wait for the worker; True if it was killed.

    Each job gets timeout_s from the moment the worker is ready (its imports done) or the previous job
    finished; starting the worker (importing torch) may take up to STARTUP_S on a busy machine.
    """
    ready, finished, deadline = False, 0, time.monotonic() + STARTUP_S
    while proc.poll() is None:
        lines = _read_lines(results_file)
        done = sum(1 for r in lines if "id" in r)
        if (not ready and any("ready" in r for r in lines)) or done > finished:
            ready, finished, deadline = True, done, time.monotonic() + timeout_s
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.05)
    return False
