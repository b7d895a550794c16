"""Roofline step time, rtol 1e-9; mistakes: sum instead of max, KV not per sequence, no fixed cost,
FLOPs without the factor 2, efficiency ignored, weight bytes taken as 2 x params."""
from types import SimpleNamespace
from typing import Any

from practice.judgekit.compare import float_mismatch
from practice.judgekit.spec import Case, Context, Limit, Mistake, with_rules

FUNCTIONS = ("roofline_step_time",)
NEEDS_MODEL = False
H100_7B = dict(params=7.6e9, weight_bytes=15.2e9, kv_bytes_per_token=57_344, bandwidth=3.35e12,
               peak_flops=989e12, efficiency=0.6, fixed_s=0.3e-3)
SMALL_GPU = dict(params=1.5e9, weight_bytes=3.0e9, kv_bytes_per_token=28_672, bandwidth=1.0e12,
                 peak_flops=120e12, efficiency=0.5, fixed_s=0.2e-3)
INT8_GPU = dict(params=8.0e9, weight_bytes=8.0e9, kv_bytes_per_token=65_536, bandwidth=2.0e12,
                peak_flops=400e12, efficiency=0.7, fixed_s=0.25e-3)  # int8 weights: 1 byte per parameter
FP32_CPU = dict(params=0.5e9, weight_bytes=2.0e9, kv_bytes_per_token=12_288, bandwidth=0.1e12,
                peak_flops=2e12, efficiency=0.4, fixed_s=1e-3)  # float32 weights: 4 bytes per parameter
SETUPS = [("H100", H100_7B, b, t, 1024) for b in (1, 64, 256) for t in (1, 5)] + [
    ("small GPU", SMALL_GPU, 8, 4, 4096), ("small GPU", SMALL_GPU, 128, 1, 512),
    ("int8 GPU", INT8_GPU, 1, 1, 2048), ("int8 GPU", INT8_GPU, 32, 8, 2048), ("int8 GPU", INT8_GPU, 512, 1, 0),
    ("fp32 CPU", FP32_CPU, 1, 1, 256), ("fp32 CPU", FP32_CPU, 4, 16, 100_000), ("fp32 CPU", FP32_CPU, 1, 64, 0)]
RULES = {
    "bytes = weight_bytes (as given, not 2 x params) + batch * context * kv_bytes_per_token": [
        "int8 GPU batch=1 tokens_per_seq=1 context=2048", "fp32 CPU batch=1 tokens_per_seq=1 context=256"],
    "the KV bytes scale with the batch": ["H100 batch=64 tokens_per_seq=1 context=1024",
                                          "fp32 CPU batch=4 tokens_per_seq=16 context=100000"],
    "flops = 2 * params * batch * tokens_per_seq": ["H100 batch=256 tokens_per_seq=5 context=1024"],
    "achieved FLOP/s = peak_flops * efficiency": ["H100 batch=256 tokens_per_seq=5 context=1024"],
    "max of the two, not the sum": ["H100 batch=64 tokens_per_seq=5 context=1024"],
    "plus fixed_s": ["H100 batch=1 tokens_per_seq=1 context=1024"],
    "context = 0 (no KV yet)": ["int8 GPU batch=512 tokens_per_seq=1 context=0", "fp32 CPU batch=1 tokens_per_seq=64 context=0"],
    "hw is not modified (checked after every call)": ["H100 batch=1 tokens_per_seq=1 context=1024"],
}
LIMITS = [Limit("contexts from 0 to 100,000", 100_000, lambda c: c.args["context"]),
          Limit("contexts from 0 to 100,000", 0, lambda c: c.args["context"], at_most=True)]


def cases(ctx: Context) -> list[Case]:
    return [Case(f"{gpu} batch={b} tokens_per_seq={t} context={c}", {"batch": b, "tokens_per_seq": t, "context": c, "hw": hw})
            for gpu, hw, b, t, c in SETUPS]


def call(fns: SimpleNamespace, case: Case, ctx: Context) -> Any:
    a = case.args
    return fns.roofline_step_time(a["batch"], a["tokens_per_seq"], a["context"], dict(a["hw"]))


def check(got: Any, expected: Any, case: Case) -> str | None:
    return float_mismatch(got, expected, "step time (s)")


def _time(b, t, c, hw, combine=max, kv_batch=True, fixed=True, flop_factor=2, efficiency=True, weights=None):
    weight_bytes = hw["weight_bytes"] if weights is None else weights * hw["params"]
    memory = (weight_bytes + (b if kv_batch else 1) * c * hw["kv_bytes_per_token"]) / hw["bandwidth"]
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
    Mistake("the weights were taken as 2 bytes per parameter; read hw['weight_bytes'] (int8 weights are 1 byte "
            "per parameter, float32 weights 4).", {"roofline_step_time": lambda b, t, c, hw: _time(b, t, c, hw, weights=2)}),
]
MISTAKES = with_rules(MISTAKES, RULES, [4, 1, 5, 2, 3, 0])  # the README rule each mistake breaks
