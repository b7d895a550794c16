"""How torch's thread settings fare when another process keeps one core busy.

    python scripts/busy_bench.py            # every setting, idle and with a spinner holding one core

Runs a notebook-like workload (greedy decode, tree speculative decoding, a few training steps of
the embedded target) in a fresh interpreter per setting, so OMP_* variables take effect at import,
and prints its wall time idle and busy (`python -c "while True: pass"` in the background).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = r"""
import time, torch
from mini_llm import load_model, generate
from tree_spec import tree_speculative_generate, QuantizedSelfDrafter
torch.manual_seed(0)
target = load_model("tiny-qwen3")
prompt = torch.tensor([list(range(1, 33))])
t0 = time.perf_counter()
generate(target, prompt, 48)
t1 = time.perf_counter()
tree_speculative_generate(target, target, prompt, 48, branching=[2, 2, 1, 1])
t2 = time.perf_counter()
opt = torch.optim.AdamW(target.parameters(), lr=1e-4)
ids = torch.randint(0, target.cfg.vocab_size, (8, 128))
for _ in range(3):
    loss = torch.nn.functional.cross_entropy(target(ids).flatten(0, 1).float(), ids.flatten())
    loss.backward(); opt.step(); opt.zero_grad()
t3 = time.perf_counter()
print(f"{t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f}")
"""
SETTINGS = {
    "default (2 threads)": {},
    "2 threads, OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "1 thread (OMP_NUM_THREADS=1)": {"OMP_NUM_THREADS": "1"},
}


def run(extra: dict[str, str]) -> list[float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_") and k != "MKL_NUM_THREADS"}
    env.update(extra, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, check=True)
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    print(f"{'setting':38s} {'load':5s} {'decode':>7s} {'tree':>7s} {'train':>7s} {'total':>7s}  (seconds, wall)")
    for name, extra in SETTINGS.items():
        for busy in (False, True):
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
            try:
                time.sleep(0.5 if busy else 0)
                times = run(extra)
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()
            print(f"{name:38s} {'busy' if busy else 'idle':5s} " + " ".join(f"{t:7.2f}" for t in times)
                  + f" {sum(times):7.2f}", flush=True)


if __name__ == "__main__":
    main()
