"""Clocks for timing work on a device, and the hardware's name.

On a CPU the clock is this thread's CPU time (`time.thread_time`): with one torch thread every op runs on the calling
thread, so it counts all of the work and none of the time other processes run (they can still slow this thread
through shared caches, memory bandwidth and SMT siblings). On CUDA kernels run asynchronously, so the clock is wall
time read after `torch.cuda.synchronize()`.
"""
from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch


def hardware_name(device: torch.device | str | None = None) -> str:
    """The name of the hardware that runs `device`: the CUDA device's name, or the CPU's model name.
    None: the CUDA device when there is one, else the CPU."""
    cuda = torch.cuda.is_available() if device is None else torch.device(device).type == "cuda"
    if cuda:
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")  # Linux: one indexN/size file per cache level of cpu0


def last_level_cache_bytes(device: torch.device | str | None = None, cpu_caches: Path = CPU_CACHES) -> int | None:
    """The size of the largest cache in front of `device`'s memory: a CUDA device's L2, or the largest of the CPU
    caches listed under `cpu_caches` (sizes such as "48K", "2048K", "480M"). None where the system does not say."""
    if _is_cuda(device):
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    units = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}
    sizes = []
    for path in cpu_caches.glob("index*/size"):
        text = path.read_text().strip()
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=None)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (so thread CPU time measures all of its work)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _is_cuda(device: torch.device | str | None) -> bool:
    return device is not None and torch.device(device).type == "cuda"


def device_clock(device: torch.device | str | None = None) -> Callable[[], float]:
    """A clock in seconds for timing work on `device`: this thread's CPU time on a CPU (or None); on CUDA, wall
    time read after `torch.cuda.synchronize()` (the thread's CPU time would miss the asynchronous kernels, and an
    unsynchronized wall clock would stop before they finish)."""
    if not _is_cuda(device):
        return time.thread_time

    def synchronized() -> float:
        torch.cuda.synchronize(device)
        return time.perf_counter()

    return synchronized


def clock_name(device: torch.device | str | None = None) -> str:
    """What `device_clock(device)` measures, for tables and plots."""
    return "wall time after torch.cuda.synchronize()" if _is_cuda(device) else "thread CPU time"


def device_ms(fn: Callable[[], object], device: torch.device | str | None = None) -> float:
    """Milliseconds of `device_clock(device)` spent in fn(): thread CPU time on a CPU, synchronized wall time on
    CUDA."""
    clock = device_clock(device)
    start = clock()
    fn()
    return 1000 * (clock() - start)
