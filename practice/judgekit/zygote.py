"""One process that imports torch once and forks a fresh worker per file (Linux only).

Importing torch costs ~3 s of CPU on a small machine, and `check` grades ~75 files. The zygote imports
what every worker imports, never runs a torch op (so it has no thread pool for a child to inherit), and
forks one child per job. Each child is still a process of its own, isolated from the judge and from every
other file: its own session (the process group a timeout kills), the environment the parent sent, the
worker's argv, stdin from /dev/null, stdout and stderr into the job's FIFO (the parent keeps their tail),
then `worker.main`. CUDA is initialised only in the children. Elsewhere (no fork after importing torch on
macOS; no fork on Windows), or with SPEC_JUDGE_FORK=0, every worker is a fresh interpreter instead
(judgekit.runner).

Protocol, one JSON object per line. Parent -> zygote: {"start": id, "job": path, "outdir": path,
"output": fifo, "env": {...}} or {"kill": id}. Zygote -> parent: {"started": id, "pid": pid} and, once it has
reaped the child, {"exited": id, "returncode": rc} (negative: killed by that signal, as in subprocess).
The zygote kills only children it has not reaped yet, so a reused pid is never signalled. It exits when its
stdin closes (the parent ended), killing the children still running.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

SUPPORTED = sys.platform == "linux"


def _send(message: dict[str, Any]) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _run_child(request: dict[str, Any], zygote_fds: tuple[int, ...]) -> None:
    """In the forked child: become a fresh worker process, run the job, never return into the zygote loop."""
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in zygote_fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        output = os.open(request["output"], os.O_WRONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        from . import worker

        sys.argv = [worker.__file__, request["job"], request["outdir"]]  # as `python -m practice.judgekit.worker`
        worker.main(request["job"], request["outdir"])  # ends with os._exit(0)
    except BaseException:
        traceback.print_exc()  # the judge's own failure (the worker reports the learner's code's errors itself)
    finally:
        os._exit(1)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def serve() -> None:
    """The zygote's loop: fork on "start", kill on "kill", report every reaped child; end at EOF on stdin."""
    from . import worker  # noqa: F401  torch, safetensors and the judge's modules, imported once
    import mini_llm  # noqa: F401  what the exercises' cases import
    import tree_spec  # noqa: F401

    running: dict[int, str] = {}  # pid -> job id, until reaped
    pids: dict[str, int] = {}
    pending = b""
    wake_read, wake_write = os.pipe()  # a SIGCHLD writes a byte here: sleep until a request or a child's exit
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_write)
    while True:
        readable, _, _ = select.select([0, wake_read], [], [])
        if wake_read in readable:
            os.read(wake_read, 4096)
        if 0 in readable:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                if "start" in request:
                    pid = os.fork()
                    if pid == 0:
                        _run_child(request, (wake_read, wake_write))
                    running[pid], pids[request["start"]] = request["start"], pid
                    _send({"started": request["start"], "pid": pid})
                elif "kill" in request and pids.get(request["kill"]) in running:
                    _kill_group(pids[request["kill"]])
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            job = running.pop(pid, None)
            if job is not None:
                pids.pop(job, None)
                _send({"exited": job, "returncode": os.waitstatus_to_exitcode(status)})
    for pid in running:
        _kill_group(pid)


class Forked:
    """A child of the zygote, with the part of subprocess.Popen's interface the runner uses."""

    def __init__(self, zygote: "Zygote", job_id: str) -> None:
        self.zygote, self.job_id = zygote, job_id

    @property
    def returncode(self) -> int | None:
        return self.zygote.returncode(self.job_id)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self) -> int:
        return self.zygote.wait(self.job_id)

    def kill_group(self) -> None:
        """SIGKILL the child's process group (the zygote does it, and only while the child is unreaped)."""
        if self.zygote.alive():
            self.zygote.request({"kill": self.job_id})
            return
        pid = self.zygote.pid(self.job_id)  # the zygote died: nobody reaps the child any more
        if pid is not None:
            _kill_group(pid)


class Zygote:
    """The parent's handle on a running zygote; thread-safe (`check` starts workers from a thread pool)."""

    def __init__(self) -> None:
        from .settings import REPO

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "practice.judgekit.zygote"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        self.changed = threading.Condition()  # guards pids, exits and ended; notified on every message
        self.writing = threading.Lock()
        self.ended = False  # the zygote's stdout closed: it exited
        self.pids: dict[str, int] = {}
        self.exits: dict[str, int] = {}
        self.count = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            message = json.loads(line)
            with self.changed:
                if "started" in message:
                    self.pids[message["started"]] = message["pid"]
                else:
                    self.exits[message["exited"]] = message["returncode"]
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def alive(self) -> bool:
        return not self.ended and self.proc.poll() is None

    def close(self) -> None:
        """End the zygote (it kills the children still running)."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def request(self, message: dict[str, Any]) -> None:
        with self.writing:
            try:
                self.proc.stdin.write((json.dumps(message) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):  # the zygote died (or was closed): callers see it in alive()
                pass

    def start(self, job_file: Path, outdir: Path, output: Path, env: dict[str, str]) -> Forked:
        """Ask for a worker for job_file (forked once the zygote has imported torch; this does not wait);
        its stdout and stderr go to the FIFO `output` (opened by the caller)."""
        with self.changed:
            self.count += 1
            job_id = str(self.count)
        self.request({"start": job_id, "job": str(job_file), "outdir": str(outdir), "output": str(output),
                      "env": env})
        return Forked(self, job_id)

    def pid(self, job_id: str) -> int | None:
        """The worker's pid once the zygote forked it (None if it died first)."""
        with self.changed:
            self.changed.wait_for(lambda: job_id in self.pids or self.ended)
            return self.pids.get(job_id)

    def returncode(self, job_id: str) -> int | None:
        with self.changed:
            return self.exits.get(job_id, -signal.SIGKILL if self.ended else None)

    def wait(self, job_id: str) -> int:
        with self.changed:
            self.changed.wait_for(lambda: job_id in self.exits or self.ended)
            return self.exits.get(job_id, -signal.SIGKILL)


_shared: Zygote | None = None
_shared_lock = threading.Lock()


def shared() -> Zygote:
    """The process's zygote, started on first use (and again if it died); it ends with this process."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive():
            _shared = Zygote()
            atexit.register(_shared.close)
        return _shared


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the judge, which closes our stdin
    serve()
    os._exit(0)  # nothing to flush or finalize; the judge waits for this exit
