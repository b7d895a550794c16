"""One-screen verdicts."""
from __future__ import annotations

from typing import Any

MAX_FAILURES_SHOWN = 1
MAX_PRINTED_LINES = 8

HEADLINES = {
    "pass": "PASS", "fail": "FAIL", "error": "ERROR: your code did not run through",
    "timeout": "TIMEOUT", "crash": "CRASH", "stale": "REFERENCE OUT OF DATE", "no-reference": "NO REFERENCE",
    "no-model": "MODEL NOT AVAILABLE",
    "internal": "JUDGE ERROR (a bug in the judge or the exercise, not in your code)",
}


def verdict(result: dict[str, Any], title: str) -> str:
    """The verdict for one graded file: case lines, the first failures with their likely mistake, status."""
    lines = [f"== {title} =="]
    cases = result.get("cases", [])
    shown = 0
    for case in cases:
        mark = "ok  " if case["ok"] else "FAIL"
        lines.append(f"  {mark} {case['name']}" + (f" - {case['note']}" if case.get("note") else ""))
        if not case["ok"] and shown < MAX_FAILURES_SHOWN:
            shown += 1
            lines.append(f"       {case['message']}")
            if case.get("mistake"):
                lines.append(f"       Likely mistake: {case['mistake']}")
    if result.get("detail"):
        lines += ["", *result["detail"].rstrip().splitlines()]
    printed = [line for line in (result.get("printed") or "").splitlines() if line.strip()]
    if printed and result["status"] != "pass":
        lines += ["", "Your code printed (last lines):", *("  " + p for p in printed[-MAX_PRINTED_LINES:])]
    passed = sum(c["ok"] for c in cases)
    summary = HEADLINES.get(result["status"], result["status"].upper())
    if cases:
        summary += f"  ({passed}/{len(cases)} cases passed)"
    if "seconds" in result:
        summary += f"  {result['seconds']:.1f} s"
    lines += ["", summary]
    if result.get("reference"):
        lines.append(result["reference"])
    return "\n".join(lines)


def progress_bar(done: int, total: int, width: int = 28) -> str:
    filled = round(width * done / total) if total else 0
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} solved"
