"""Roofline step time, rtol 1e-9; mistakes: sum instead of max, KV not per sequence, no fixed cost,
FLOPs without the factor 2, efficiency ignored."""
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import float_mismatch
from practice.judgekit.spec import Case, Context, Mistake

FUNCTIONS = ("roofline_step_time",)
NEEDS_MODEL = False
H100_7B = dict(params=7.6e9, weight_bytes=15.2e9, kv_bytes_per_token=57_344, bandwidth=3.35e12,
               peak_flops=989e12, efficiency=0.6, fixed_s=0.3e-3)
SMALL_GPU = dict(params=1.5e9, weight_bytes=3.0e9, kv_bytes_per_token=28_672, bandwidth=1.0e12,
                 peak_flops=120e12, efficiency=0.5, fixed_s=0.2e-3)
SETUPS = [("H100", H100_7B, b, t, 1024) for b in (1, 64, 256) for t in (1, 5)] + [
    ("small GPU", SMALL_GPU, 8, 4, 4096), ("small GPU", SMALL_GPU, 128, 1, 512)]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{gpu} batch={b} tokens_per_seq={t} context={c}", {"batch": b, "tokens_per_seq": t, "context": c, "hw": hw})
            for gpu, hw, b, t, c in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    a = case.args
    return fns.roofline_step_time(a["batch"], a["tokens_per_seq"], a["context"], dict(a["hw"]))


def check(got: Any, expected: Any, case: Case) -> str | None:
    return float_mismatch(got, expected, "step time (s)")


def _time(b, t, c, hw, combine=max, kv_batch=True, fixed=True, flop_factor=2, efficiency=True):
    memory = (hw["weight_bytes"] + (b if kv_batch else 1) * c * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = flop_factor * hw["params"] * b * t / (hw["peak_flops"] * (hw["efficiency"] if efficiency else 1))
    return combine(memory, compute) + (hw["fixed_s"] if fixed else 0)


MISTAKES = [
    Mistake("memory and compute times were added; they overlap, so the step takes their maximum.",
            {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, combine=lambda x, y: x + y)}),
    Mistake("the KV bytes must scale with the batch: every sequence reads its own cache (batch * context * kv_bytes_per_token).",
            {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, kv_batch=False)}),
    Mistake("the fixed per-step overhead fixed_s is missing.",
            {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, fixed=False)}),
    Mistake("a forward costs 2 FLOPs per parameter per token (multiply + add).",
            {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, flop_factor=1)}),
    Mistake("the achieved FLOP/s are peak_flops * efficiency, not peak_flops.",
            {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, efficiency=False)}),
]
