"""What one target forward over n new tokens costs on this machine: the measured `CostCurve`.

    curve = measure_target_costs(target)              # ~10 s on the embedded model (1 thread)
    curve.ms(1), curve.relative(5), curve.relative(25)   # decode step; verify of 5 / 25 nodes in decode steps
    curve.plot()                                      # a matplotlib Figure (no pyplot)
    CostCurve.from_json(COSTS_DIR / "tiny-qwen3.json")   # the curve recorded on the reference machine

Timing: one torch thread, `device_clock` (thread CPU time on a CPU), median of `repeats`. Every forward starts with
`context` tokens already in the KV cache, like a verify pass in the middle of a generation.
`python -m tree_spec.tools.costs` measures the embedded target and writes its JSON.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from mini_llm import Transformer
from mini_llm.load import MODELS_DIR

from ..core.topology import tree_mask
from .clocks import device_clock, device_ms, hardware_name, one_thread

DEFAULT_NEW_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
COSTS_DIR = MODELS_DIR / "costs"


@dataclass
class CostCurve:
    """Measured cost of one target forward over n new tokens, at a fixed cached context.

    new_tokens / ms_points: the measured points (median or mean ms per forward, `method` says which). `ms(n)`
    interpolates them piecewise-linearly and, beyond the last point, follows the least-squares line a + b·n fitted
    to the points with n >= 2 (the 1-token decode step sits off that line: `profile.compare_profiles` shows why).
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
                f"25 tokens = {self.relative(25):.2f} (from the measured points)")

    def plot(self, ax=None):
        """Measured points, interpolation and fitted line, in ms and in decode steps -> matplotlib Figure."""
        from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

        if ax is None:
            fig = Figure(figsize=(6.5, 4))
            ax = fig.subplots()
        else:
            fig = ax.figure
        xs = self.new_tokens
        ax.plot(xs, self.ms_points, "o-", label=f"measured ({self.method.rpartition(', ')[2]})")
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


def random_ids(target: Transformer, n: int, seed: int = 0) -> torch.Tensor:
    """n (at least 1) random token ids [1, n] on the target's device, the same for the same seed."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, target.cfg.vocab_size, (1, max(n, 1)), generator=gen, device="cpu").to(target.device)


class ForwardTimer:
    """Times target forwards over n new tokens after `context` cached tokens; samples accumulate across
    `sample()` calls (so a benchmark can interleave them with its runs), `curve()` averages them.

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
            target(random_ids(target, context), cache=self.cache)

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
        untimed round first. Largest first: a forward over a hundred tokens evicts weights from the CPU caches,
        and the 1-token forward timed right after it came out 10-20 % slower than a decode step in a loop (whose
        forwards follow one another), which is what it stands for."""
        device, context = self.target.device, self.context
        kwargs = {n: {} for n in self.new_tokens}
        if self.tree_shaped:
            kwargs = {n: dict(mask=tree_mask([-1] + list(range(n - 1)), device),
                              positions=torch.arange(context, context + n, device=device)) for n in self.new_tokens}
        for r in range(repeats + warmup):
            for n in reversed(self.new_tokens):
                self.cache.truncate(context)
                ms = device_ms(lambda: self.target(self.ids[n], cache=self.cache, **kwargs[n]), device)
                if r >= warmup:
                    self.times[n].append(ms)
        self.cache.truncate(context)

    def curve(self, model_name: str = "", average: str = "median") -> CostCurve:
        """Every sample so far, averaged per n by `average`: "median" (robust to a slow spell) or "mean" (what a
        prediction of total time needs: single forwards on a shared CPU are skewed towards slow ones, so their
        median reads below the mean a loop of many forwards pays)."""
        if average not in ("median", "mean"):
            raise ValueError(f"average must be 'median' or 'mean', got {average!r}")
        cuda = self.target.device.type == "cuda"
        return CostCurve(
            new_tokens=self.new_tokens,
            ms_points=[getattr(statistics, average)(self.times[n]) for n in self.new_tokens],
            context=self.context, model=model_name, hardware=hardware_name(self.target.device),
            torch_version=torch.__version__,
            threads=torch.get_num_threads(), repeats=min(len(v) for v in self.times.values()),
            tree_mask=self.tree_shaped,
            method=f"CUDA wall time with synchronize, {average}" if cuda else f"thread CPU time, {average}",
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
    clock, ids = device_clock(target.device), random_ids(target, n_new, seed=2)
    cache = target.new_cache(batch_size=1, max_len=context + n_new)
    times: dict[str, list[float]] = {name: [] for name in conditions}
    with one_thread(), torch.inference_mode():
        target(random_ids(target, context), cache=cache)
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
