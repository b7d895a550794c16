"""A head's training log (`train_log.json`): its card, its plot, a continued run's log, two logs compared.

The log holds the run's setup, the loss of every step and the held-out evaluation of every epoch; `train_heads`
writes it, the card (`README.md`) and the plot (`acceptance.png`) are made from it, and notebook 03 reads budgets
and equal-step comparisons from it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


def eval_at(log: dict, step: float) -> tuple[float, float]:
    """A training log's held-out (τ, depth-1 acceptance) at `step`, interpolated linearly between its evaluations."""
    steps = [e["step"] for e in log["evals"]]
    tau = float(np.interp(step, steps, [e["tau"] for e in log["evals"]]))
    return tau, float(np.interp(step, steps, [e["acceptance_per_position"][0] for e in log["evals"]]))


def compare_training_logs(first: dict, second: dict) -> str:
    """Two training logs (`train_log.json`) side by side at equal steps and at equal training time.

    Held-out τ and depth-1 acceptance come from `eval_at`; a step's time is its run's training seconds / steps
    (an even pace assumed). Equal steps = the shorter run's step count; equal time = the shorter run's training
    seconds."""
    pace = {id(log): log["train_seconds"] / log["steps"] for log in (first, second)}
    steps = min(first["steps"], second["steps"])
    seconds = min(first["train_seconds"], second["train_seconds"])
    lines = [f"{'':14s} {'kind':7s} {'steps':>6s} {'minutes':>7s} {'τ (chain of 5)':>14s} {'depth-1':>7s}"]
    for label, step_of in (("equal steps", lambda log: steps), ("equal time", lambda log: seconds / pace[id(log)])):
        for log in (first, second):
            step = min(step_of(log), log["steps"])
            tau, d1 = eval_at(log, step)
            lines.append(f"{label:14s} {log['kind']:7s} {step:6.0f} {step * pace[id(log)] / 60:7.1f} {tau:14.2f} {d1:7.2f}")
    lines.append(f"seconds per step: {first['kind']} {pace[id(first)]:.2f}, {second['kind']} {pace[id(second)]:.2f} "
                 f"({pace[id(second)] / pace[id(first)]:.1f}x)")
    return "\n".join(lines)


def plot(log: dict, path: Path) -> None:
    """Held-out acceptance per position vs epoch, and the training loss."""
    from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

    fig = Figure(figsize=(10, 4))
    ax1, ax2 = fig.subplots(1, 2)
    evals = log["evals"]
    for d in range(len(evals[0]["acceptance_per_position"])):
        ax1.plot([e["epoch"] for e in evals], [e["acceptance_per_position"][d] for e in evals], marker="o",
                 label=f"depth {d + 1}")
    ax1.set(xlabel="epoch", ylabel="acceptance (fraction of verify passes)", ylim=(0, 1),
            title=f"{log['kind']}: held-out acceptance per position")
    ax1.legend()
    ax2.plot([s["step"] for s in log["losses"]], [s["loss"] for s in log["losses"]])
    ax2.set(xlabel="step", ylabel="loss", title="training loss")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write_card(folder: Path, log: dict) -> None:
    """README.md of a head folder from its training log (both acceptance rates named)."""
    final = log["evals"][-1]
    fmt = lambda xs: ", ".join(f"{a:.2f}" for a in xs)
    d = log["data"]
    runs = training_runs(log)
    windows = distinct_windows(runs)
    drawn = "" if windows == d["windows"] else (
        f" ({', '.join(str(r['windows']) for r in runs)} per run, drawn with seeds "
        f"{', '.join(str(r['seed']) for r in runs)}: runs with one seed and count train on the same windows)")
    reproduce = ", then ".join(f"`{r['command']}`" for r in runs)
    schedule = f"AdamW lr {log['lr']}" if len(runs) == 1 else "AdamW, " + "; then ".join(
        f"{r['steps']} steps at lr {r['lr']} ({r['train_seconds'] / 60:.1f} min)" for r in runs) + ", continuing its head"
    text = f"""# {log['kind']} draft head for `{log['target']}`

- Head: {log['kind']} ({log['head_params']:,} trainable parameters); the target's embedding, final norm and
  LM head are shared, not stored. Files: `head.safetensors`, `config.json`; load with
  `tree_spec.drafters.head_io.load_head(folder, target)`.
- Data (self-distillation): {windows} windows from the stdlib training split{drawn}, each {d['prompt_len']} text
  tokens + {d['gen_len']} tokens generated greedily by the target; labels = the target's own next-token
  distributions. {"Built" if len(runs) == 1 else "The last run's windows were built"} in {d['seconds']:.0f} s.
- Training: {log['steps']} steps of batch {log['batch']} ({log['epochs']:.2f} epochs), {schedule},
  {log['train_seconds'] / 60:.1f} min on {log['hardware']}.
- Held-out evaluation: greedy chains of {len(final['acceptance_per_position'])} drafts, {log['eval']['prompts']}
  prompts x {log['eval']['new_tokens']} tokens, output identical to plain greedy.
  - τ = {final['tau']:.2f} tokens per target call (counting the target's own token).
  - Per-position acceptance rate α (P(depth d accepted | depths < d accepted), the α of
    E = (1 − α^(k+1)) / (1 − α)): α = {final['alpha']:.2f} pooled; per depth [{fmt(final['alpha_at_depth'])}].
  - Acceptance ratio (accepted / proposed draft tokens, vLLM's counter; for a chain τ ≈ 1 + k · ratio,
    approximate only through the prefill and the shorter chains near the end): {final['acceptance_ratio']:.2f}.
  - Fraction of verify passes that accepted depth d (unconditional): [{fmt(final['acceptance_per_position'])}].
- Reproduce: {reproduce}
"""
    (folder / "README.md").write_text(text)


def continued_log(earlier: dict, later: dict) -> dict:
    """The log of a run that continued `earlier`'s head (`--init`) as one training: steps, epochs, seconds, losses and
    evaluations add up (the later run's counted after the earlier's; its step-0 evaluation, of the head it started
    from, dropped), and `runs` lists each run's command, steps, seconds and learning rate."""
    offset, epochs = earlier["steps"], earlier["epochs"]
    shifted = lambda rows: [{**r, "step": r["step"] + offset} for r in rows if r["step"] > 0]  # noqa: E731
    evals = [{**e, "epoch": e["epoch"] + epochs} for e in shifted(later["evals"])]
    return {**later, "steps": offset + later["steps"], "epochs": epochs + later["epochs"],
            "train_seconds": earlier["train_seconds"] + later["train_seconds"],
            "total_seconds": earlier["total_seconds"] + later["total_seconds"],
            "losses": earlier["losses"] + shifted(later["losses"]), "evals": earlier["evals"] + evals,
            "runs": training_runs(earlier) + training_runs(later)}


def training_runs(log: dict) -> list[dict]:
    """The runs a head was trained in, first to last: each one's command, steps, seconds, learning rate, and the
    windows it trained on and the seed that drew them (a run logged without them: the log's windows, the default seed 0,
    which every run used before the seed was logged)."""
    if "runs" in log:
        return [{"windows": log["data"]["windows"], "seed": 0, **run} for run in log["runs"]]
    return [{**{k: log[k] for k in ("command", "steps", "train_seconds", "lr")}, "windows": log["data"]["windows"],
             "seed": log.get("seed", 0)}]


def distinct_windows(runs: list[dict]) -> int:
    """How many different self-distillation windows `training_runs` trained on: runs with the same seed and window
    count drew the same windows."""
    return sum({(r["seed"], r["windows"]): r["windows"] for r in runs}.values())
