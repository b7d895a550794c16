"""`python -m tree_spec.tools.costs`: measure the target's forward-cost curve
(`tree_spec.analysis.curve.measure_target_costs`) and save it as JSON under models/costs/."""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from mini_llm import load_model

from ..analysis.curve import COSTS_DIR, measure_target_costs
from ..analysis.profile import compare_profiles


def main(argv: Sequence[str] | None = None) -> None:
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
