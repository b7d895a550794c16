"""Parent side: one fresh worker process per file, with a time limit, a memory cap and capped output.

On Linux each worker is forked from a zygote that imported torch once (judgekit.zygote); elsewhere, or with
SPEC_JUDGE_FORK=0, it is a new interpreter. The worker's events come back as raw JSON lines (judgekit.worker);
nothing here imports learner code or torch, so the worker can start while the parent imports torch to compare
its outputs.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import zygote
from .catalog import Exercise
from .settings import REPO, Settings

STARTUP_S = 300.0  # importing torch and loading the model on a busy machine
OUTPUT_CAP_BYTES = 64_000  # the tail of what the learner's code printed that is kept


@dataclass
class Job:
    exercise: Exercise
    file: Path | None  # None when recording


@dataclass
class RunResult:
    """What one worker reported: its event lines, the tail of its output, how it ended."""

    events: list[dict[str, Any]]
    outdir: Path
    printed: str
    printed_bytes: int
    ended: str  # "done" | "timeout" | "exit"
    returncode: int | None
    seconds: float
    timeout_s: float
    memory_mb: int
    tmp: tempfile.TemporaryDirectory = field(repr=False)

    def running_case(self) -> str | None:
        cases = [e["progress"] for e in self.events if "progress" in e]
        return cases[-1] if cases else None


class _Tail(threading.Thread):
    """Reads a pipe (or FIFO) to its end, keeping only the last OUTPUT_CAP_BYTES bytes."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.buffer, self.total = fd, bytearray(), 0

    def run(self) -> None:
        while chunk := os.read(self.fd, 65536):
            self.total += len(chunk)
            self.buffer += chunk
            if len(self.buffer) > 2 * OUTPUT_CAP_BYTES:
                del self.buffer[:-OUTPUT_CAP_BYTES]
        os.close(self.fd)

    def text(self) -> str:
        return bytes(self.buffer[-OUTPUT_CAP_BYTES:]).decode("utf-8", "replace")


def read_events(path: Path) -> list[dict[str, Any]]:
    """The worker's complete JSON lines (a half-written last line is ignored)."""
    events = []
    for line in (path.read_text(errors="replace") if path.exists() else "").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


@dataclass
class Worker:
    """A started worker: `wait()` for its RunResult, or `stop()` it when its result is no longer needed."""

    wait: Callable[[], RunResult]
    stop: Callable[[], None]


def start(job: Job, settings: Settings, mode: str, device: str, timeout_s: float) -> Worker:
    """Start a fresh worker for one job now (it loads the model while the caller does its own work)."""
    tmp = tempfile.TemporaryDirectory(prefix="spec-judge-")
    outdir = Path(tmp.name)
    memory_mb = settings.memory_mb if mode == "grade" else 0
    (outdir / "job.json").write_text(json.dumps({
        "mode": mode, "device": device, "model_path": str(settings.model_path().resolve()),
        "references": str(settings.references.resolve()), "threads": os.environ.get("OMP_NUM_THREADS", "1"),
        "exercise": str(job.exercise.folder), "file": str(job.file.resolve()) if job.file else None,
        "memory_mb": memory_mb,
    }))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    began = time.monotonic()
    if settings.fork and zygote.SUPPORTED:
        proc, output, hold = _fork(outdir, env)
    else:
        proc = subprocess.Popen(
            [sys.executable, "-m", "practice.judgekit.worker", str(outdir / "job.json"), str(outdir)],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        output, hold = os.dup(proc.stdout.fileno()), None
        proc.stdout.close()
    tail = _Tail(output)
    tail.start()

    def finish_output() -> None:
        """The worker's group is dead: drop our own write end of its FIFO, so the tail reads to EOF."""
        nonlocal hold
        if hold is not None:
            os.close(hold)
            hold = None
        tail.join(timeout=5)

    def wait() -> RunResult:
        ended = _wait(proc, outdir / "results.jsonl", timeout_s)
        finish_output()
        return RunResult(read_events(outdir / "results.jsonl"), outdir, tail.text(), tail.total, ended,
                         proc.returncode, time.monotonic() - began, timeout_s, memory_mb, tmp)

    def stop() -> None:
        _kill(proc)
        finish_output()
        tmp.cleanup()

    return Worker(wait, stop)


def _fork(outdir: Path, env: dict[str, str]) -> tuple[zygote.Forked, int, int]:
    """A worker forked by the zygote -> (its handle, read end of its output FIFO, our write end of it).

    We hold a write end until the worker's group is dead: the FIFO then reads to its end even when the
    worker died before opening it.
    """
    fifo = outdir / "output"
    os.mkfifo(fifo)
    output = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    hold = os.open(fifo, os.O_WRONLY)
    os.set_blocking(output, True)
    return zygote.shared().start(outdir / "job.json", outdir, fifo, env), output, hold


def _kill(proc: subprocess.Popen | zygote.Forked) -> None:
    """SIGKILL the worker's whole process group (threads and processes its learner code left behind)."""
    if isinstance(proc, zygote.Forked):
        proc.kill_group()
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def _wait(proc: subprocess.Popen | zygote.Forked, results: Path, timeout_s: float) -> str:
    """Wait for the worker and stop its whole process group as soon as it reported its end -> how it ended.

    The time limit counts from the worker's "ready" (torch imported, model loaded); before that it may take
    up to STARTUP_S.
    """
    deadline, ready = time.monotonic() + STARTUP_S, False
    ended = "exit"
    while proc.poll() is None:
        events = read_events(results)
        if not ready and any("ready" in e for e in events):
            ready, deadline = True, time.monotonic() + timeout_s
        if any(key in e for e in events for key in ("done", "error", "internal", "no_model")):
            ended = "done"
            break
        if time.monotonic() > deadline:
            ended = "timeout"
            break
        time.sleep(0.02)
    else:
        if any(key in e for e in read_events(results) for key in ("done", "error", "internal", "no_model")):
            ended = "done"
    _kill(proc)
    return ended
