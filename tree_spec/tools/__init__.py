"""The command-line tools, run with `python -m tree_spec.tools.<name>`; the notebooks import none of them.

- `bench`: every draft source on one harness (`bench_methods`, `bench_run`, `bench_report`, `bench_batch`).
- `tune`: each drafter's tree shape, confidence stop and draft vocabulary for this machine (`search`,
  `dynamic_search`, `step_costs`, `named_drafters`), saved in models/tuned/.
- `graph_bench`: the list-based loops against the fixed-shape decoders, eager and as CUDA graphs.
- `costs`: the target's forward-cost curve, saved in models/costs/.
- `args`: argument types that check their range (also `python -m tree_spec`'s).
"""
