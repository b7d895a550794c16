"""The benchmark's report: the Markdown tables and the bar plot."""
from __future__ import annotations

import platform
from pathlib import Path

import torch

from ..analysis.clocks import hardware_name
from ..analysis.curve import CostCurve
from .bench_run import TOLERANCE


def machine(device: torch.device | str = "cpu") -> str:
    """The machine in one line: hardware, torch threads, torch version, OS."""
    return (f"{hardware_name(device)}, {torch.get_num_threads()} torch thread(s), torch {torch.__version__}, "
            f"{platform.system()}")


def _depths(values: list[float] | None) -> str:
    return "—" if not values else " / ".join(f"{v:.2f}" for v in values)


def _call(c: dict) -> str:
    """A reconciliation row's median draft call: "ms (decode steps)", or — without level-wise calls."""
    ms = c.get("draft_call_ms_median")
    return "—" if ms is None else f"{ms:.2f} ({c['draft_call_decode_steps']:.2f})"


MODEL_BASED = ("small model", "quantized self", "Medusa", "EAGLE", "MTP")


def tuned_vs_fixed(rows: list[dict]) -> list[str]:
    """Markdown lines: each tuned row against the fastest fixed-shape row of its drafter (same run), and the
    fastest model-based drafter (small model, INT4 self, Medusa, EAGLE-1/2/3, MTP) against plain greedy."""
    lines = ["", "## Tuned shapes against fixed ones, and the fastest model-based drafter (this run)", ""]
    for r in rows:
        if r["form"].endswith("(= tuned)"):
            lines.append(f"- {r['method']}: tuning kept the fixed shape ({r['form']}); one row.")
        if not r["method"].endswith(" (tuned)"):
            continue
        fixed = [f for f in rows if f["method"] == r["method"].removesuffix(" (tuned)")]
        if not fixed:
            continue
        best = min(fixed, key=lambda f: f["ms_per_token"])
        verdict = "at least as fast" if r["ms_per_token"] <= best["ms_per_token"] else "SLOWER"
        lines.append(f"- {r['method']}: {r['form']} {r['ms_per_token']:.2f} ms/token vs the fixed {best['form']} "
                     f"{best['ms_per_token']:.2f}: {verdict}.")
    model_based = [r for r in rows if r["method"].startswith(MODEL_BASED)]
    if model_based:
        top = max(model_based, key=lambda r: r["speedup"])
        lines.append(f"- Fastest model-based drafter: {top['method']}, {top['form']}: {top['speedup']:.2f}x plain greedy.")
    return lines if len(lines) > 3 else []


def markdown(result: dict) -> str:
    """The result as Markdown: the main table, the cost curve and the reconciliation table."""
    fmt = lambda v, spec: "—" if v is None else format(v, spec)  # noqa: E731
    greedy = result["temperature"] == 0
    clock = result["clock"]
    lines = [
        f"# Benchmark: every draft source on `{result['target']}` (temperature {result['temperature']})", "",
        f"{result['prompts']} held-out prompts x {result['new_tokens']} new tokens, batch 1, fp32, on "
        f"{result['machine']} (device {result['device']}); methods interleaved per prompt; ms/token = {clock} / "
        f"tokens; speedup = plain mini_llm greedy ms/token / method ms/token (same run).",
        "",
        "τ = tokens per target call counting the target's own token (plain = 1.00). Two acceptance rates: "
        "α = the per-position rate (depth d accepted given every shallower depth was; the α of "
        "E = (1 − α^(k+1)) / (1 − α)); ratio = accepted / proposed draft tokens (vLLM's counter; for a chain "
        "τ ≈ 1 + k · ratio, exact when every pass drafts k and the prefill is left out). α per depth = α at depth "
        "1 / 2 / .... identical = prompts whose tokens equal plain "
        f"{'greedy' if greedy else 'sampling (not expected)'}. \"confidence stop\" rows: chains that draft up to k "
        "tokens and stop once the draft's path probability (the product of its probabilities of its own tokens) "
        "falls below θ (EAGLE-2's rule on a chain), so k varies per pass and τ ≈ 1 + (drafts per pass) · ratio. "
        "A dynamic tree that \"stops below frontier path probability θ\" expands at most d levels and stops once "
        "the nodes it would expand next hold a summed path probability below θ (Dynamic Depth Decoding).",
        "",
        "| method | form | τ | α (per-position) | acceptance ratio | α per depth | target calls | draft calls | "
        "ms/token | speedup | identical |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['form']} | {fmt(r['tau'], '.2f')} | {fmt(r['alpha'], '.2f')} | "
            f"{fmt(r['acceptance_ratio'], '.2f')} | {_depths(r['alpha_at_depth'])} | {fmt(r['target_calls'], 'd')} | "
            f"{fmt(r['draft_calls'], 'd')} | {r['ms_per_token']:.2f} | {r['speedup']:.2f}x | "
            f"{r['identical']}/{result['prompts']} |"
        )
    if result["skipped"]:
        lines += ["", "Skipped: " + "; ".join(result["skipped"]) + "."]
    lines += tuned_vs_fixed(result["rows"])
    if result.get("draft_vocab_coverage"):
        shares = "; ".join(f"{c['size']} tokens cover {c['coverage']:.1%}" for c in result["draft_vocab_coverage"])
        lines += ["", f"Reduced draft vocabularies (the N most frequent tokens of the training text, as EAGLE-3's "
                      f"draft-to-target map and FR-Spec): {shares} of the tokens plain decoding wrote in this run, the "
                      f"most often a drafter limited to them can match the target at one position."]
    curve = CostCurve.from_dict(result["cost_curve"]) if result.get("cost_curve") else None
    if curve is not None:
        points = ", ".join(f"{n}: {m:.2f}" for n, m in zip(curve.new_tokens, curve.ms_points))
        lines += [
            "", "## The target's cost curve (measured in this run)", "",
            f"One target forward over n new tokens after {curve.context} cached tokens, {curve.method} of "
            f"{curve.repeats} samples taken between the prompts (ms): {points}. Fit for n >= 2: "
            f"{curve.intercept_ms:.2f} + {curve.slope_ms:.3f}·n ms. A verify over 5 tokens costs "
            f"{curve.relative(5):.2f} decode steps, over 25 tokens {curve.relative(25):.2f}: not free on this machine.",
        ]
        lines += [
            "", "## Reconciliation: predicted vs measured ms/token", "",
            "Per method: the measured per-depth acceptance (chains: α at depth d; trees: the fraction of verify "
            "passes that accepted depth d) gives the predicted tokens per pass τ̂ = 1 + α1 + α1·α2 + ... (chains) or "
            "1 + Σ_d acceptance at depth d (trees). Predicted ms/token = (prefills from the curve + "
            "(tokens − prompts) / τ̂ × (draft ms per pass + verify ms per pass from the curve at each pass's node "
            f"count)) / tokens. Draft ms per pass: {clock} inside the drafter's calls in this run. Overhead = "
            "measured total − prefill − verify forwards − drafter work, per pass (not in the model); its median: "
            "the same per verify pass (per decode step for plain), the median over passes. Draft call: the median "
            "ms of one drafter call (one tree level), and in decode steps (the curve at 1 token). "
            f"Gap = predicted / measured − 1; rows outside ±{TOLERANCE:.0%} say which term is off.",
            "",
            "| method | form | per-depth acceptance | τ̂ per pass | measured τ per pass | nodes/pass | draft ms/pass | "
            "verify ms/pass (curve) | verify ms/pass (measured) | overhead ms/pass | overhead ms/pass (median) | "
            "draft call ms (decode steps) | predicted ms/token | measured ms/token | gap | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in result["rows"]:
            c = r.get("reconciliation")
            if c is None:
                continue
            lines.append(
                f"| {r['method']} | {r['form']} | {_depths(c['per_depth'])} | {c['predicted_tau']:.2f} | "
                f"{c['measured_tau_per_pass']:.2f} | {c['nodes_per_pass']:.1f} | {c['draft_ms_per_pass']:.2f} | "
                f"{c['verify_ms_per_pass_curve']:.2f} | {c['verify_ms_per_pass_measured']:.2f} | "
                f"{c['overhead_ms_per_pass']:.2f} | {c['overhead_ms_median']:.3f} | {_call(c)} | "
                f"{c['predicted_ms_per_token']:.2f} | "
                f"{c['measured_ms_per_token']:.2f} | {c['gap']:+.1%} | {c['note']} |"
            )
        lines += ["", "The transformers baselines run their own loop (not instrumented): no reconciliation row."]
    lines += peer_section(result.get("vllm_peer"))
    lines += ["", f"Command: `{result['command']}`", ""]
    return "\n".join(lines)


def peer_section(peer: dict | None) -> list[str]:
    """Markdown lines for `--vllm-peer` (none without it)."""
    if peer is None:
        return []
    lines = ["", "## vLLM beside the course's loop (wall time)", ""]
    if "skipped" in peer:
        return lines + [f"Skipped: {peer['skipped']}."]
    return lines + [
        f"vLLM's CPU build ({peer['engine']}) and the course's loop on the same model, machine and "
        f"{peer['prompts']} held-out prompts x {peer['new_tokens']} new tokens, greedy, one thread each (vLLM's kernels "
        "bound to one core), wall time including each engine's own scheduling; batch 1 = one request after another, "
        f"batch {peer['batch']} = all at once. ms/token = median of {peer['repeats']} repeats (min..max). \"faster\" only "
        "when the repeats' ranges do not overlap. The draft model's k is 4, prompt lookup's 5 (n-grams 1..3, vLLM's "
        "rule), the EAGLE-3 head's 3. Where the course's loop cannot run a row, the table says why.", "",
        *peer["table"].splitlines(), "", f"Peer command: `{peer['command']}`"]


def plot(result: dict, path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

    rows = result["rows"]
    labels = [f"{r['method']}\n{r['form']}" for r in rows]
    fig = Figure(figsize=(13, 0.45 * len(rows) + 1.5))
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    ax1.barh(labels, [r["speedup"] for r in rows], color="tab:blue")
    ax1.axvline(1.0, color="gray", lw=1)
    ax1.set(xlabel=f"speedup vs plain mini_llm greedy (same run, {result['clock']})")
    ax2.barh(labels, [r["tau"] or 0 for r in rows], color="tab:green")
    ax2.set(xlabel="τ: tokens per target call")
    ax1.invert_yaxis()
    fig.suptitle(f"{result['target']}, temperature {result['temperature']}, {result['prompts']} prompts x "
                 f"{result['new_tokens']} tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
