"""One-screen verdicts."""
from __future__ import annotations

from typing import Any

MAX_FAILURES_SHOWN = 3
MAX_PRINTED_LINES = 8

HEADLINES = {
    "pass": "PASS", "fail": "FAIL", "error": "ERROR",
    "timeout": "TIMEOUT", "crash": "CRASH", "memory": "OUT OF MEMORY", "stale": "REFERENCE OUT OF DATE",
    "no-reference": "NO REFERENCE", "bad-reference": "REFERENCE CHANGED OR MISSING", "no-model": "MODEL NOT AVAILABLE",
    "internal": "JUDGE ERROR (a bug in the judge or the exercise, not in your code)",
}
STOPPED = {"error": "raised an exception", "timeout": "did not finish in time", "memory": "ran out of memory",
           "crash": "killed the grading process"}


def before_stop(result: dict[str, Any]) -> str:
    """What the cases before the one that stopped the run did: 'cases 1-2 passed', 'no case ran before it', ..."""
    done = result.get("cases", [])
    passed = sum(c["ok"] for c in done)
    if not done:
        return "no case ran before it"
    span = "case 1" if len(done) == 1 else f"cases 1-{len(done)}"
    if passed == len(done):
        return f"{span} passed"
    if passed == 0:
        return f"{span} failed"
    return f"of {span}, {passed} passed and {len(done) - passed} failed"


def progress(result: dict[str, Any]) -> str:
    """'(5/8 cases passed)', or for a run that stopped early '(case 3 of 8 raised an exception; cases 1-2 passed)'."""
    cases, total = result.get("cases", []), result.get("total", len(result.get("cases", [])))
    if "stopped_at" in result:
        what = STOPPED.get(result["status"], "stopped the run")
        return f"(case {result['stopped_at']['index']} of {total} {what}; {before_stop(result)})"
    if result["status"] == "error" and not cases:
        return f"(no case ran: the file failed before the first of {total})" if total else "(no case ran)"
    return f"({sum(c['ok'] for c in cases)}/{total} cases passed)" if cases else ""


def verdict(result: dict[str, Any], title: str) -> str:
    """Case lines, up to three failing cases grouped by function, the likely mistake when unambiguous, status."""
    lines = [f"== {title} =="]
    cases = result.get("cases", [])
    for case in cases:
        mark = "ok  " if case["ok"] else "FAIL"
        lines.append(f"  {mark} {case['name']}" + (f" - {case['note']}" if case.get("note") else ""))
    if "stopped_at" in result:
        at = result["stopped_at"]
        lines.append(f"  STOP {at['name']}" + (f" - {at['note']}" if at.get("note") else "") + "  <- stopped here")
        if result["total"] > at["index"]:
            lines.append(f"       ({result['total'] - at['index']} more case(s) not run)")
    failing = [c for c in cases if not c["ok"]]
    if failing:
        shown = failing[:MAX_FAILURES_SHOWN]
        more = f" (the first {len(shown)} of {len(failing)})" if len(failing) > len(shown) else ""
        lines += ["", f"Failing cases{more}:"]
        for function in dict.fromkeys(c.get("function", "") for c in shown):
            if function:
                lines.append(f"  {function}:")
            for case in (c for c in shown if c.get("function", "") == function):
                lines.append(f"    {case['name']}: {case['message']}")
        if result.get("mistake"):
            lines.append(f"  Likely mistake: {result['mistake']}")
    if result.get("detail"):
        lines += ["", *result["detail"].rstrip().splitlines()]
    printed = [line for line in (result.get("printed") or "").splitlines() if line.strip()]
    if printed and result["status"] != "pass":
        note = f"; {result['printed_note']}" if result.get("printed_note") else ""
        lines += ["", f"Your code printed (last lines{note}):", *("  " + p[:300] for p in printed[-MAX_PRINTED_LINES:])]
    summary = HEADLINES.get(result["status"], result["status"].upper())
    if progress(result):
        summary += f"  {progress(result)}"
    if "seconds" in result:
        summary += f"  {result['seconds']:.1f} s"
    lines += ["", summary]
    lines += [text for text in (result.get("reference"), result.get("graded_on")) if text]
    return "\n".join(lines)


def progress_bar(done: int, total: int, width: int = 28) -> str:
    filled = round(width * done / total) if total else 0
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} solved"
