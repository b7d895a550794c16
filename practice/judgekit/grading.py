"""Parent side of grading: verifies the reference, starts a fresh worker, compares its raw outputs, decides.

This process never imports learner code: the worker (judgekit.worker) runs it and returns raw outputs
(JSON + safetensors), and the comparison, the diagnosis and the verdict are made here, out of its reach.
"""
from __future__ import annotations

import importlib.util
import re
import signal
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from . import references
from .catalog import Exercise
from .report import before_stop
from .runner import OUTPUT_CAP_BYTES, Job, RunResult, start
from .settings import Settings

_lock = threading.Lock()
_cases_modules: dict[Path, ModuleType] = {}


def cases_module(exercise: Exercise) -> ModuleType:
    """The exercise's cases.py (maintainer code), imported once per judge process."""
    with _lock:
        if exercise.folder not in _cases_modules:
            spec = importlib.util.spec_from_file_location(f"judged_{exercise.name.replace('-', '_')}",
                                                          exercise.folder / "cases.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _cases_modules[exercise.folder] = module
        return _cases_modules[exercise.folder]


def graded_on(settings: Settings) -> str:
    return f"graded on {references.device_name(settings.device)} ({settings.device})"


def reference_problem(ex: Exercise, settings: Settings, meta: dict[str, Any] | None) -> tuple[str, str] | None:
    """(status, detail) when the reference is missing, altered or stale; None when it can be used."""
    if meta is None:
        return "no-reference", f"no reference recorded in {settings.references}; run `{references.RECORD_COMMAND}`."
    broken = references.integrity(meta, settings.references, ex.name)
    if broken:
        return "bad-reference", broken
    stale = references.staleness(meta, ex.folder, settings.model_path() if ex.needs_model else None)
    return ("stale", stale) if stale else None


def grade_file(ex: Exercise, path: Path, settings: Settings) -> dict[str, Any]:
    """Grade one file -> {status, cases, mistake, detail, reference, graded_on, printed, seconds}."""
    meta = references.load_meta(settings.references, ex.name)
    if meta is None:
        return {"status": "no-reference", "detail": reference_problem(ex, settings, meta)[1]}
    worker = start(Job(ex, path), settings, "grade", settings.device,
                   settings.time_limit(meta.get("solution_seconds")))
    base = {"reference": references.describe(meta), "graded_on": graded_on(settings)}
    problem = reference_problem(ex, settings, meta)
    if problem:
        worker.stop()
        return {**base, "status": problem[0], "detail": problem[1]}
    cases = cases_module(ex)
    data = references.load_data(settings.references, ex.name)
    run = worker.wait()
    try:
        return {**base, **judge_run(cases, data, run, settings), "seconds": round(run.seconds, 2)}
    finally:
        run.tmp.cleanup()


def judge_run(cases: ModuleType, data: dict[str, Any], run: RunResult, settings: Settings) -> dict[str, Any]:
    """Compare the worker's raw outputs with the reference, case by case, and decide the status."""
    from safetensors.torch import load_file

    from .spec import Context
    from .wire import decode

    result: dict[str, Any] = {"cases": [], "printed": run.printed}
    if run.printed_bytes > len(run.printed.encode()):
        result["printed_note"] = f"{run.printed_bytes:,} bytes printed; the last {OUTPUT_CAP_BYTES:,} kept"
    ctx = Context(settings.device, settings.model_path())
    all_cases = cases.cases(ctx)
    names = [c.name for c in all_cases]
    outputs: dict[str, Any] = {}
    mutated: dict[str, str] = {}
    for event in run.events:
        if "case" not in event:
            continue
        name = event["case"]
        if name not in names or name in outputs:
            return {**result, "status": "error", "detail": "the worker's results were tampered with (an unknown or "
                    "repeated case); the judge only trusts one output per case, written by the worker."}
        i = names.index(name)
        file = run.outdir / f"case-{i}.safetensors"
        try:
            outputs[name] = decode(event["output"], load_file(str(file)) if file.exists() else {})
            if isinstance(event.get("mutated"), str):
                mutated[name] = event["mutated"]
        except Exception as e:  # a missing tensor key or an unreadable file: not the worker's own writing
            return {**result, "status": "error", "detail": f"the output of case '{name}' could not be read ({e})."}
    functions = getattr(cases, "FUNCTIONS", ("",))
    for case in all_cases:
        if case.name not in outputs:
            continue
        message = mutated.get(case.name) or cases.check(outputs[case.name], data["expected"][case.name], case)
        result["cases"].append({"name": case.name, "note": case.note, "ok": message is None, "message": message,
                                "function": case.args.get("fn", functions[0]) if isinstance(case.args, dict) else ""})
    end = next((e for e in run.events if any(k in e for k in ("done", "error", "internal", "no_model"))), None)
    complete = len(result["cases"]) == len(all_cases)
    result["total"] = len(all_cases)
    if not complete and run.running_case() in names:
        result["stopped_at"] = {"index": names.index(run.running_case()) + 1, "name": run.running_case(),
                                "note": all_cases[names.index(run.running_case())].note}
    if end is not None and "error" in end:
        status = "memory" if end.get("out_of_memory") else "error"
        detail = str(end["error"])
        if end.get("in_case") and "stopped_at" in result:
            detail = f"{stopped_headline(result, 'raised an exception')}:\n{detail}{checks(cases, result)}"
        if status == "memory":
            detail += (f"\n\nYour code ran out of memory: the judge lets it use {run.memory_mb} MiB on top of torch "
                       f"and the model (SPEC_JUDGE_MEMORY_MB). Look for a tensor that grows with a loop.")
        return {**result, "status": status, "detail": detail}
    if end is not None and "internal" in end:
        return {**result, "status": "internal", "detail": str(end["internal"])}
    if end is not None and "no_model" in end:
        return {**result, "status": "no-model", "detail": str(end["no_model"])}
    if run.ended == "timeout":
        case = f" in case '{run.running_case()}'" if run.running_case() else ""
        return {**result, "status": "timeout", "detail": (
            f"your code did not finish within {run.timeout_s:g} s{case} and was stopped: look for a loop that "
            f"never ends (e.g. a while loop whose condition never changes).{checks(cases, result)}")}
    if end is None or not complete:
        return {**result, "status": "crash", "detail": crash_detail(run)}
    failing = [c for c in result["cases"] if not c["ok"]]
    result["status"] = "fail" if failing else "pass"
    if failing:
        by_name = {c.name: c for c in all_cases}
        result["mistake"] = diagnose(cases, data, outputs, {c["name"]: by_name[c["name"]] for c in failing}, by_name)
        named = next((m.rule for m in cases.MISTAKES if m.message == result["mistake"] and m.rule), None)
        names = {c["name"] for c in failing}
        for case in failing:  # each failing case names the rule it shows broken
            case["rule"] = named or rule_for(cases, case["name"], case["message"], names)
            if case["rule"] and not NAMES_RULE.search(case["message"]):
                case["message"] = f"{case['message'].rstrip()} Rule: {case['rule']}."
    return result


NAMES_RULE = re.compile(r"\brules?: ", re.I)  # a message that already names the rule it shows broken


def rule_for(cases: ModuleType, name: str, message: str, failing: set[str] | None = None) -> str | None:
    """The README rule (a key of cases.RULES) a failing case shows broken when no modelled mistake names it: for a
    changed argument the rule that the inputs come back unchanged, else, among the rules that list the case, the one
    that lists the most of the failing cases, then the most specific (listing the fewest cases)."""
    rules: dict[str, list[str]] = getattr(cases, "RULES", {})
    unchanged = [r for r in rules if "not modified" in r or "unchanged" in r]
    if "modified the caller's" in (message or "") and unchanged:
        return unchanged[0]
    listing = [r for r, names in rules.items() if name in names and r not in unchanged]
    failing = failing or {name}
    return min(listing, key=lambda r: (-len(failing & set(rules[r])), len(rules[r]))) if listing else None


def checks(cases: ModuleType, result: dict[str, Any]) -> str:
    """'\nRule this case checks: ...' for the case a run stopped in (empty when no rule lists it)."""
    rule = rule_for(cases, result["stopped_at"]["name"], "") if "stopped_at" in result else None
    return f"\nRule this case checks: {rule}." if rule else ""


def stopped_headline(result: dict[str, Any], what: str) -> str:
    """'Case 3 of 8 ('name') raised an exception; cases 1-2 passed' from a result with `stopped_at`."""
    at, total = result["stopped_at"], result["total"]
    return f"Case {at['index']} of {total} ('{at['name']}') {what}; {before_stop(result)}"


def crash_detail(run: RunResult) -> str:
    case = f" in case '{run.running_case()}'" if run.running_case() else ""
    code = run.returncode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        why = {"SIGKILL": "killed from outside, most likely by the system for using too much memory",
               "SIGSEGV": "a segmentation fault (inside torch this can be an allocation refused by the memory cap)"}
        return f"the grading process died{case}: {name}, {why.get(name, 'a fatal signal')}."
    return (f"the grading process stopped{case} before your code returned all its results (exit code {code}); "
            f"does your code call exit() or os._exit()?")


def diagnose(cases: ModuleType, data: dict[str, Any], outputs: dict[str, Any], failing: dict[str, Any],
             graded: dict[str, Any] | None = None) -> str | None:
    """The one modelled mistake that explains EVERY failing case (and fails no passing one), else None.

    Statistical exercises (with `expected`): a mistake's effect can be too small to show at the learner's sample
    size in some cases, so a learner may pass a case the recorded mistake fails. The mistake is named only when the
    learner's outputs fit its recorded outputs in every case it fails, passed or not (chi-square against them), so
    that a different error failing a subset of its cases (e.g. children assumed contiguous, which fails only the
    tree in no BFS order) is not given its message. graded: every graded case by name (default: the failing ones).
    """
    statistical, graded = hasattr(cases, "expected"), graded or failing
    fits = []
    for i, recorded in data["mistakes"].items():
        if not statistical and set(recorded) != set(failing):
            continue
        if not all(name in recorded for name in failing):
            continue
        seen = {name: graded[name] for name in recorded if statistical and name in graded and name in outputs}
        if all(cases.check(outputs[name], recorded[name], case) is None for name, case in {**failing, **seen}.items()):
            fits.append(cases.MISTAKES[int(i)].message)
    return fits[0] if len(fits) == 1 else None
