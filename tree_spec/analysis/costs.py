"""A measured cost model of the learner's machine: what one target forward over n new tokens costs, and one drafter call.

For notebook 00 (and every notebook that needs "what does a verify cost here"):

    from tree_spec.costs import CostCurve, measure_target_costs, profile_forward, compare_profiles
    curve = measure_target_costs(target)              # ~10 s on the embedded model (1 thread)
    curve.ms(1), curve.relative(5), curve.relative(25)   # decode step; verify of 5 / 25 nodes in decode steps
    curve.plot()                                      # a matplotlib Figure (no pyplot)
    print(compare_profiles(target, 1, 2))             # ops whose time jumps between 1 and 2 new tokens
    CostCurve.from_json("models/costs/tiny-qwen3.json")   # the curve recorded on the course machine

Timing method: one torch thread, `time.thread_time()` (the CPU time of the calling thread, which is where every op
runs with one thread), median of `repeats`. The time other processes run is not counted, but they still slow this
thread through shared caches, memory bandwidth and SMT siblings, so the same measurement varies run to run.
Every forward starts with `context` tokens already in the KV cache, like a verify pass in the middle
of a generation. `python -m tree_spec.costs` measures the embedded target and writes its JSON.

What the per-op profile shows on the embedded target (tiny-qwen3, CPU, fp32, context 128; `compare_profiles`):
some work exists only when T > 1: the [T, S] attention mask is built (`ones` + `tril`), turned into its additive
form and `repeat`ed for the query groups, and scaled_dot_product_attention runs with it in each layer. That part is
small (a few tenths of a ms). How much the matrix products (`linear`) grow from 1 to 2 rows depends on the machine's
BLAS: about the same on the course's Intel machine (2026-11-30), +25 to +65 % from run to run on an AMD EPYC
(2026-12-01), where it is the largest change. Run `compare_profiles(target)` to print the numbers on your machine.
"""
from __future__ import annotations

import json
import platform
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from mini_llm import Transformer

from .drafters import Drafter, as_drafter
from .topology import tree_mask

DEFAULT_NEW_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
COSTS_DIR = Path(__file__).resolve().parent.parent / "models" / "costs"
T = TypeVar("T")


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


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (so thread CPU time measures all of its work)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def device_clock(device: torch.device | str | None = None) -> Callable[[], float]:
    """A clock in seconds for timing work on `device`: this thread's CPU time (`time.thread_time`) on a CPU;
    on CUDA, wall time read after `torch.cuda.synchronize()` (kernels run asynchronously, so the thread's
    CPU time would miss them and an unsynchronized wall clock would stop before they finish)."""
    if device is None or torch.device(device).type != "cuda":
        return time.thread_time

    def synchronized() -> float:
        torch.cuda.synchronize(device)
        return time.perf_counter()

    return synchronized


def clock_name(device: torch.device | str | None = None) -> str:
    """What `device_clock(device)` measures, for tables and plots."""
    if device is None or torch.device(device).type != "cuda":
        return "thread CPU time"
    return "wall time after torch.cuda.synchronize()"


def thread_ms(fn: Callable[[], object], device: torch.device | None = None) -> float:
    """Milliseconds of `device_clock(device)` spent in fn(): thread CPU time, or synchronized wall time on CUDA."""
    clock = device_clock(device)
    start = clock()
    fn()
    return 1000 * (clock() - start)


@dataclass
class CostCurve:
    """Measured cost of one target forward over n new tokens, at a fixed cached context.

    new_tokens / ms_points: the measured points (median ms per forward). `ms(n)` interpolates them
    piecewise-linearly and, beyond the last point, follows the least-squares line a + b·n fitted to the
    points with n >= 2 (the 1-token decode step sits off that line: see the module docstring).
    """

    new_tokens: list[int]
    ms_points: list[float]
    context: int
    model: str = ""
    hardware: str = ""
    torch_version: str = ""
    threads: int = 1
    repeats: int = 0
    tree_mask: bool = False
    method: str = "thread CPU time, median of repeats"
    intercept_ms: float = field(init=False)
    slope_ms: float = field(init=False)

    def __post_init__(self) -> None:
        if len(self.new_tokens) != len(self.ms_points) or len(self.new_tokens) < 2:
            raise ValueError("need at least two measured points, one ms value per new-token count")
        order = sorted(range(len(self.new_tokens)), key=self.new_tokens.__getitem__)
        self.new_tokens = [int(self.new_tokens[i]) for i in order]
        self.ms_points = [float(self.ms_points[i]) for i in order]
        pts = [(n, m) for n, m in zip(self.new_tokens, self.ms_points) if n >= 2] or list(zip(self.new_tokens,
                                                                                            self.ms_points))
        if len(pts) == 1:
            self.intercept_ms, self.slope_ms = pts[0][1], 0.0
            return
        mean_n = sum(n for n, _ in pts) / len(pts)
        mean_m = sum(m for _, m in pts) / len(pts)
        var = sum((n - mean_n) ** 2 for n, _ in pts)
        self.slope_ms = sum((n - mean_n) * (m - mean_m) for n, m in pts) / var
        self.intercept_ms = mean_m - self.slope_ms * mean_n

    def ms(self, n: float) -> float:
        """Predicted ms of one forward over n new tokens (interpolated; the fitted line beyond the last point)."""
        xs, ys = self.new_tokens, self.ms_points
        if n <= xs[0]:
            return ys[0] if n == xs[0] else self.intercept_ms + self.slope_ms * n
        if n >= xs[-1]:
            return ys[-1] + self.slope_ms * (n - xs[-1])
        for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
            if x0 <= n <= x1:
                return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
        raise AssertionError("unreachable")

    @property
    def decode_ms(self) -> float:
        """ms of one plain decode step (1 new token)."""
        return self.ms(1)

    def relative(self, n: float) -> float:
        """Cost of a forward over n new tokens in decode steps: ms(n) / ms(1)."""
        return self.ms(n) / self.decode_ms

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self, path: str | Path | None = None) -> str:
        """The curve as JSON text; written to `path` too when given."""
        text = json.dumps(self.to_dict(), indent=1) + "\n"
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text)
        return text

    @classmethod
    def from_dict(cls, d: dict) -> "CostCurve":
        d = {k: v for k, v in d.items() if k not in ("intercept_ms", "slope_ms")}
        return cls(**d)

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> "CostCurve":
        """Load from a JSON file path or JSON text."""
        text = str(path_or_text)
        if not text.lstrip().startswith("{"):
            text = Path(path_or_text).read_text()
        return cls.from_dict(json.loads(text))

    def summary(self) -> str:
        """One line: where and how it was measured, the decode step and the fitted line."""
        return (f"{self.model or 'target'} on {self.hardware or '?'} ({self.threads} thread, torch {self.torch_version}), "
                f"context {self.context}: decode {self.decode_ms:.2f} ms; ms(n) ≈ {self.intercept_ms:.2f} + "
                f"{self.slope_ms:.3f}·n for n >= 2; verify of 5 tokens = {self.relative(5):.2f} decode steps, "
                f"25 tokens = {self.relative(25):.2f}")

    def plot(self, ax=None):
        """Measured points, interpolation and fitted line, in ms and in decode steps -> matplotlib Figure."""
        from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

        if ax is None:
            fig = Figure(figsize=(6.5, 4))
            ax = fig.subplots()
        else:
            fig = ax.figure
        xs = self.new_tokens
        ax.plot(xs, self.ms_points, "o-", label="measured (median)")
        grid = [0, xs[-1] * 1.1]
        ax.plot(grid, [self.intercept_ms + self.slope_ms * g for g in grid], "--", color="gray",
                label=f"fit n>=2: {self.intercept_ms:.2f} + {self.slope_ms:.3f}·n ms")
        ax.axhline(self.decode_ms, color="tab:red", lw=0.8, label=f"decode step {self.decode_ms:.2f} ms")
        ax.set(xlabel="new tokens in one forward (verify nodes)", ylabel="ms per forward",
               title=f"{self.model or 'target'}: forward cost, context {self.context}, {self.threads} thread")
        right = ax.secondary_yaxis("right", functions=(lambda m: m / self.decode_ms, lambda r: r * self.decode_ms))
        right.set_ylabel("decode steps")
        ax.set_xlim(0, xs[-1] * 1.1)
        ax.set_ylim(0, None)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig


def _context_ids(target: Transformer, context: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, target.cfg.vocab_size, (1, max(context, 1)), generator=gen, device="cpu").to(target.device)


class ForwardTimer:
    """Times target forwards over n new tokens after `context` cached tokens; samples accumulate across
    `sample()` calls (so a benchmark can interleave them with its runs), `curve()` takes the medians.

    One torch thread must be set by the caller (see `one_thread`). tree_shaped: pass an explicit [n, n]
    (chain-shaped, i.e. causal) mask and positions, as a tree verify does; otherwise the default causal path.
    """

    def __init__(self, target: Transformer, new_tokens: Sequence[int] = DEFAULT_NEW_TOKENS, context: int = 128,
                 tree_shaped: bool = False) -> None:
        self.target, self.context, self.tree_shaped = target, context, tree_shaped
        self.new_tokens = sorted({int(n) for n in new_tokens})
        if self.new_tokens[0] < 1:
            raise ValueError("new token counts must be >= 1")
        device = target.device
        self.cache = target.new_cache(batch_size=1, max_len=context + self.new_tokens[-1] + 1)
        gen = torch.Generator().manual_seed(1)
        self.ids = {n: torch.randint(0, target.cfg.vocab_size, (1, n), generator=gen, device="cpu").to(device)
                    for n in self.new_tokens}
        self.times: dict[int, list[float]] = {n: [] for n in self.new_tokens}
        with torch.inference_mode():
            target(_context_ids(target, context), cache=self.cache)

    @torch.inference_mode()
    def warm(self, forwards: int = 3) -> None:
        """Untimed 1-token forwards: after other work evicted the weights from the CPU caches, the first forwards
        run slower (measured in the benchmark: its curve's 1-token point came out above its 2-token point)."""
        for _ in range(forwards):
            self.cache.truncate(self.context)
            self.target(self.ids[self.new_tokens[0]], cache=self.cache)
        self.cache.truncate(self.context)

    @torch.inference_mode()
    def sample(self, repeats: int = 1, warmup: bool = True) -> None:
        """Time every n `repeats` times, the sizes interleaved (round r times every n once), so a slow spell of a
        shared machine lands on all sizes alike instead of on the ones timed during it; with `warmup`, one
        untimed round first."""
        device, context = self.target.device, self.context
        kwargs = {n: {} for n in self.new_tokens}
        if self.tree_shaped:
            kwargs = {n: dict(mask=tree_mask([-1] + list(range(n - 1)), device),
                              positions=torch.arange(context, context + n, device=device)) for n in self.new_tokens}
        for r in range(repeats + warmup):
            for n in self.new_tokens:
                self.cache.truncate(context)
                ms = thread_ms(lambda: self.target(self.ids[n], cache=self.cache, **kwargs[n]), device)
                if r >= warmup:
                    self.times[n].append(ms)
        self.cache.truncate(context)

    def curve(self, model_name: str = "") -> CostCurve:
        """The medians of every sample so far."""
        cuda = self.target.device.type == "cuda"
        return CostCurve(
            new_tokens=self.new_tokens, ms_points=[statistics.median(self.times[n]) for n in self.new_tokens],
            context=self.context, model=model_name, hardware=hardware_name(self.target.device),
            torch_version=torch.__version__,
            threads=torch.get_num_threads(), repeats=min(len(v) for v in self.times.values()),
            tree_mask=self.tree_shaped,
            method="CUDA wall time with synchronize, median" if cuda else "thread CPU time, median",
        )


def measure_target_costs(
    target: Transformer,
    new_tokens: Sequence[int] = DEFAULT_NEW_TOKENS,
    context: int = 128,
    repeats: int = 7,
    device: torch.device | str | None = None,
    tree_shaped: bool = False,
    model_name: str = "",
) -> CostCurve:
    """Time one target forward over n new tokens after `context` cached tokens, for each n -> CostCurve.

    One torch thread, thread CPU time (CUDA: wall time with synchronize), median of `repeats` after one
    warm-up per n. tree_shaped: an explicit [n, n] tree mask (chain-shaped) and positions, as a tree verify
    passes them; otherwise the default causal path.
    """
    device = torch.device(device) if device is not None else target.device
    if device != target.device:
        raise ValueError(f"target is on {target.device}, asked to measure on {device}")
    with one_thread():
        timer = ForwardTimer(target, new_tokens, context, tree_shaped)
        timer.sample(repeats)
        return timer.curve(model_name)


def forward_after(
    target: Transformer, before: Callable[[], object], n_new: int = 5, context: int = 128, repeats: int = 30,
) -> float:
    """Median ms (`device_clock`) of one target forward over `n_new` tokens after `context` cached tokens, each
    timed right after calling `before()` (e.g. a chain's draft calls; `lambda: None` for back-to-back forwards).

    A decoding loop never runs two verify passes back to back: the drafter runs in between. On a CPU what ran
    just before can change what a forward costs (what the caches hold, among others), so a curve timed back to
    back can underestimate a real loop's verify passes. To compare conditions, time them in one interleaved
    run with `forward_times_after`: separate calls drift apart with the machine's load.
    """
    return statistics.median(forward_times_after(target, {"": before}, n_new, context, repeats)[""])


def forward_times_after(
    target: Transformer, conditions: Mapping[str, Callable[[], object]], n_new: int = 5, context: int = 128,
    repeats: int = 30,
) -> dict[str, list[float]]:
    """ms (`device_clock`) of `repeats` target forwards over `n_new` tokens after `context` cached tokens per
    condition, each timed right after calling that condition's `before()`. The conditions take turns within each
    round, so round r of every list ran at the same moment: ratios of round-aligned entries cancel the machine's
    drift. The order rotates from round to round, so no condition always runs first (or always follows the
    same one). {name: before} -> {name: [ms per round]}."""
    clock, ids = device_clock(target.device), _context_ids(target, n_new, seed=2)
    cache = target.new_cache(batch_size=1, max_len=context + n_new)
    times: dict[str, list[float]] = {name: [] for name in conditions}
    with one_thread(), torch.inference_mode():
        target(_context_ids(target, context), cache=cache)
        names = list(conditions)
        for r in range(repeats + 1):  # the first round is a warm-up
            for name in names[r % len(names):] + names[:r % len(names)]:
                conditions[name]()
                start = clock()
                target(ids, cache=cache)
                if r:
                    times[name].append(1000 * (clock() - start))
                cache.truncate(context)
    return times


@dataclass
class DrafterCost:
    """Measured drafter cost. ms_per_call: mean ms of one `next_logits` call (= one tree level, the whole
    frontier in one batch); by_width: mean ms per call keyed by the frontier size; calls: calls timed."""

    ms_per_call: float
    by_width: dict[int, float]
    calls: int

    def ms(self, width: int) -> float:
        """ms of one call with `width` frontier nodes (the nearest measured width; the mean if none)."""
        if not self.by_width:
            return self.ms_per_call
        nearest = min(self.by_width, key=lambda w: (abs(w - width), w))
        return self.by_width[nearest]


DRAFTER_METHODS = ("next_logits", "propose", "observe", "observe_verify")


@contextmanager
def timed_drafter(drafter: Drafter) -> Iterator[list[tuple[str, int, float]]]:
    """Inside the block, every call of the drafter's work methods (`DRAFTER_METHODS`: drafting and taking the
    target's features) appends (method, frontier size or 0, ms) to the yielded list: thread CPU ms, or
    synchronized wall ms when the drafter runs on CUDA (`device_clock`). A method that calls another (or
    itself) is counted once, at the outermost call."""
    record: list[tuple[str, int, float]] = []
    depth = [0]
    clock = device_clock(drafter.device)

    def wrap(name, original):
        def timed(*args, **kwargs):
            depth[0] += 1
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    width = len(args[3]) if name == "next_logits" and len(args) > 3 else 0
                    record.append((name, width, 1000 * (clock() - start)))
        return timed

    wrapped = [name for name in DRAFTER_METHODS if hasattr(drafter, name)]
    for name in wrapped:
        setattr(drafter, name, wrap(name, getattr(drafter, name)))
    try:
        yield record
    finally:
        for name in wrapped:
            delattr(drafter, name)  # back to the class methods


@contextmanager
def timed_forward(target: Transformer) -> Iterator[list[tuple[int, float]]]:
    """Inside the block, every target forward appends (new tokens T, ms of `device_clock(target.device)`) to the
    yielded list."""
    record: list[tuple[int, float]] = []
    clock = device_clock(target.device)

    def timed(ids, *args, **kwargs):
        start = clock()
        try:
            return type(target).forward(target, ids, *args, **kwargs)
        finally:
            record.append((ids.shape[1], 1000 * (clock() - start)))

    target.forward = timed
    try:
        yield record
    finally:
        del target.forward


@dataclass
class TimeSplit:
    """Where the time of one or more generations went, in ms of `device_clock`; `a + b` pools two.

    A generation's first target forward is its prefill; the later ones are its decode steps (plain) or verify
    passes (speculative). `rest_ms` is everything else the loop did: sampling, acceptance, cache moves, Python.
    """

    total_ms: float = 0.0
    prefill_ms: float = 0.0
    forward_ms: float = 0.0       # the target forwards after the prefill
    prefill_sizes: Counter = field(default_factory=Counter)   # new tokens per row of a prefill -> prefills
    forward_sizes: Counter = field(default_factory=Counter)   # new tokens per row of a later forward -> forwards
    draft_calls: list = field(default_factory=list)   # (method, frontier width or 0, ms) per drafter call, in order

    @property
    def forwards(self) -> int:
        """Target forwards after the prefill."""
        return sum(self.forward_sizes.values())

    @property
    def draft_ms(self) -> float:
        """The drafter's work methods (`timed_drafter`), summed over its calls."""
        return sum(ms for *_, ms in self.draft_calls)

    @property
    def rest_ms(self) -> float:
        return self.total_ms - self.prefill_ms - self.forward_ms - self.draft_ms

    def to_dict(self) -> dict:
        """JSON-ready: the fields (counters as {size: count}), and rest_ms."""
        return dict(total_ms=self.total_ms, prefill_ms=self.prefill_ms, forward_ms=self.forward_ms,
                    draft_ms=self.draft_ms, rest_ms=self.rest_ms, prefill_sizes=dict(self.prefill_sizes),
                    forward_sizes=dict(self.forward_sizes), draft_calls=[list(c) for c in self.draft_calls])

    def __add__(self, other: TimeSplit) -> TimeSplit:
        return TimeSplit(self.total_ms + other.total_ms, self.prefill_ms + other.prefill_ms,
                         self.forward_ms + other.forward_ms, self.prefill_sizes + other.prefill_sizes,
                         self.forward_sizes + other.forward_sizes, self.draft_calls + other.draft_calls)


def time_split(run: Callable[[], T], target: Transformer, drafter: object | None = None) -> tuple[T, TimeSplit]:
    """`run()` once (one generation), timed whole and by part -> (its result, the TimeSplit). Target forwards are
    timed by `timed_forward`, the drafter's work methods (if a drafter is given) by `timed_drafter`; one clock,
    `device_clock(target.device)`."""
    clock = device_clock(target.device)
    with ExitStack() as stack:
        forwards = stack.enter_context(timed_forward(target))
        calls = stack.enter_context(timed_drafter(drafter)) if drafter is not None else []
        start = clock()
        result = run()
        total_ms = 1000 * (clock() - start)
    split = TimeSplit(total_ms, draft_calls=list(calls))
    if forwards:
        split.prefill_ms, split.prefill_sizes = forwards[0][1], Counter([forwards[0][0]])
        split.forward_ms, split.forward_sizes = sum(ms for _, ms in forwards[1:]), Counter(n for n, _ in forwards[1:])
    return result, split


def measure_drafter_cost(
    drafter: Drafter | Transformer,
    target: Transformer,
    prompt_ids: Sequence[int] | None = None,
    new_tokens: int = 32,
    branching: Sequence[int] = (2, 2, 1, 1),
) -> DrafterCost:
    """ms per drafter call (one `next_logits` call = one tree level for the whole frontier), measured inside a short
    greedy tree generation with one torch thread and thread CPU time (feature drafters get real target features).
    Work done in `observe` (e.g. a head encoding the target's features) is not included: see `timed_drafter`."""
    from .tree import tree_speculative_generate

    drafter = as_drafter(drafter)
    prompt = list(prompt_ids) if prompt_ids is not None else _context_ids(target, 64)[0].tolist()
    with one_thread(), timed_drafter(drafter) as timed:
        tree_speculative_generate(target, drafter, prompt, new_tokens, branching=branching)
    record = [(width, ms) for name, width, ms in timed if name == "next_logits"]
    if not record:
        raise ValueError("the drafter was never called")
    by_width: dict[int, list[float]] = {}
    for width, ms in record:
        by_width.setdefault(width, []).append(ms)
    return DrafterCost(
        ms_per_call=sum(ms for _, ms in record) / len(record),
        by_width={w: sum(v) / len(v) for w, v in sorted(by_width.items())},
        calls=len(record),
    )


class _OpTimer(TorchDispatchMode):
    """Accumulates the thread CPU ms and the call count of every aten op run inside it, keyed by the op's name,
    or with `by_shape` by (name, the shapes of its tensor arguments)."""

    def __init__(self, by_shape: bool = False) -> None:
        super().__init__()
        self.by_shape = by_shape
        self.ms: dict = {}
        self.calls: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        start = time.thread_time()
        out = func(*args, **(kwargs or {}))
        key = func.overloadpacket.__name__
        if self.by_shape:   # every tensor argument, also inside lists (cat, stack) and keyword arguments
            tensors = tree_flatten((args, kwargs or {}))[0]
            key = (key, tuple(tuple(a.shape) for a in tensors if torch.is_tensor(a)))
        self.ms[key] = self.ms.get(key, 0.0) + 1000 * (time.thread_time() - start)
        self.calls[key] = self.calls.get(key, 0) + 1
        return out


def profile_ops(fn: Callable[[], object], by_shape: bool = False) -> tuple[object, dict]:
    """Run fn() on one torch thread with every aten op timed -> (fn's result, {op: (thread CPU ms, calls)}).

    For comparing two implementations op by op (e.g. a list-based and a fixed-shape decoding loop): the
    calls are exact counts, the ms include a little timer overhead per op. On CUDA the ms are host time only.
    by_shape: key by (op, shapes of its tensor arguments), so the calls under one key do the same work.
    """
    timer = _OpTimer(by_shape)
    with one_thread(), timer:
        result = fn()
    return result, {key: (ms, timer.calls[key]) for key, ms in timer.ms.items()}


@torch.inference_mode()
def profile_forward(target: Transformer, n: int, context: int = 128, repeats: int = 20) -> list[tuple[str, float, int]]:
    """Per-op timing of one target forward over n new tokens after `context` cached tokens, one thread.

    Every op the forward dispatches is timed with thread CPU time (the timer itself adds a little per op).
    Returns [(op name, ms per forward, calls per forward)], most expensive first.
    """
    cache = target.new_cache(batch_size=1, max_len=context + n + 1)
    ids = _context_ids(target, n, seed=2)
    timer = _OpTimer()
    with one_thread():
        target(_context_ids(target, context), cache=cache)
        for _ in range(3):  # warm-up
            cache.truncate(context)
            target(ids, cache=cache)
        for _ in range(repeats):
            cache.truncate(context)
            with timer:
                target(ids, cache=cache)
    rows = [(op, ms / repeats, timer.calls[op] // repeats) for op, ms in timer.ms.items()]
    return sorted(rows, key=lambda r: r[1], reverse=True)


MATMUL_OPS = frozenset({"linear", "mm", "addmm", "matmul", "bmm"})  # the matrix products of the weights


@dataclass
class MatmulSplit:
    """One forward's thread CPU ms in the weight matrix products (`MATMUL_OPS`) and in every other op, and its
    aten op calls: matmul time scales with the weights a forward reads, the rest mostly with the op count."""

    matmul_ms: float
    other_ms: float
    op_calls: int

    @property
    def total_ms(self) -> float:
        return self.matmul_ms + self.other_ms


def matmul_split(model: Transformer, n: int = 1, context: int = 128, repeats: int = 20) -> MatmulSplit:
    """`profile_forward` of one forward over n new tokens, summed into matmul ms, other ms and op calls."""
    rows = profile_forward(model, n, context, repeats)
    matmul = sum(ms for op, ms, _ in rows if op in MATMUL_OPS)
    return MatmulSplit(matmul, sum(ms for _, ms, _ in rows) - matmul, sum(calls for *_, calls in rows))


def compare_profiles(target: Transformer, n_a: int = 1, n_b: int = 2, context: int = 128, top: int = 10) -> str:
    """A text table: ms per forward (and calls) of each op at n_a and n_b new tokens, largest increase first."""
    a = {op: (ms, c) for op, ms, c in profile_forward(target, n_a, context)}
    b = {op: (ms, c) for op, ms, c in profile_forward(target, n_b, context)}
    ops = sorted(set(a) | set(b), key=lambda k: b.get(k, (0.0, 0))[0] - a.get(k, (0.0, 0))[0], reverse=True)
    lines = [f"{'op':32s} {f'{n_a} new token(s)':>18s} {f'{n_b} new tokens':>18s} {'change':>8s}   "
             f"(thread CPU ms per forward, calls)"]
    for op in ops[:top]:
        (ms_a, c_a), (ms_b, c_b) = a.get(op, (0.0, 0)), b.get(op, (0.0, 0))
        lines.append(f"{op[:32]:32s} {ms_a:11.3f} ({c_a:3d}) {ms_b:11.3f} ({c_b:3d}) {ms_b - ms_a:+8.3f}")
    tot_a, tot_b = sum(v[0] for v in a.values()), sum(v[0] for v in b.values())
    lines.append(f"{'all ops':32s} {tot_a:17.3f} {tot_b:17.3f} {tot_b - tot_a:+8.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    from mini_llm import load_model

    p = argparse.ArgumentParser(description="Measure the target's forward-cost curve and save it as JSON.")
    p.add_argument("--model", default="tiny-qwen3")
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--out", default=None, help="JSON path (default models/costs/<model>.json)")
    p.add_argument("--profile", action="store_true", help="also print the 1 vs 2 token profile")
    args = p.parse_args(argv)
    target = load_model(args.model)
    curve = measure_target_costs(target, context=args.context, repeats=args.repeats, model_name=args.model)
    out = Path(args.out) if args.out else COSTS_DIR / f"{Path(args.model).name}.json"
    curve.to_json(out)
    print(curve.summary())
    for n, m in zip(curve.new_tokens, curve.ms_points):
        print(f"  n={n:3d}: {m:7.3f} ms = {m / curve.decode_ms:5.2f} decode steps")
    print(f"wrote {out}")
    if args.profile:
        print(compare_profiles(target, 1, 2, args.context))


if __name__ == "__main__":
    main()
