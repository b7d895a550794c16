"""Runs in a subprocess: imports learner (or solution) files, grades them case by case, or records references.

Usage: python -m practice.judgekit.worker JOBS.json RESULTS.jsonl
Once its imports are done it appends {"ready": true} to RESULTS; each job then appends one JSON line,
and before each case a progress line, so the parent knows which case was running when it had to stop
a file that ran too long.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

from . import references
from .spec import Case, Context, ModelUnavailable

Progress = Callable[[str], None]  # called with a case's name before the case runs


class LearnerError(Exception):
    """The learner's code failed; `text` is the trimmed, learner-facing explanation."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def trimmed_traceback(exc: BaseException, learner_file: Path) -> str:
    """The traceback frames inside the learner's file, then the exception line."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == learner_file]
    lines = traceback.format_list(frames) if frames else []
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def import_file(path: Path, module_name: str) -> ModuleType:
    """Import a .py file under a unique name; syntax and import-time errors become LearnerError."""
    try:
        source = path.read_text()
        code = compile(source, str(path), "exec")
    except SyntaxError as e:
        caret = " " * max((e.offset or 1) - 1, 0) + "^"
        raise LearnerError(
            f'SyntaxError in {path.name}, line {e.lineno}: {e.msg}\n    {(e.text or "").rstrip()}\n    {caret}'
        ) from None
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader=None, origin=str(path)))
    module.__file__ = str(path)
    try:
        exec(code, module.__dict__)
    except (Exception, SystemExit) as e:
        raise LearnerError(f"importing {path.name} failed:\n{trimmed_traceback(e, path)}") from None
    return module


def functions_of(module: ModuleType, names: tuple[str, ...], path: Path) -> SimpleNamespace:
    missing = [n for n in names if not callable(getattr(module, n, None))]
    if missing:
        raise LearnerError(f"{path.name} must define {', '.join(f'`{n}`' for n in missing)} (see the exercise's README).")
    return SimpleNamespace(**{n: getattr(module, n) for n in names})


def load_cases_module(exercise_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cases_{exercise_dir.name.replace('-', '_')}", exercise_dir / "cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(cases: ModuleType, fns: SimpleNamespace, case: Case, ctx: Context, path: Path) -> Any:
    try:
        return cases.call(fns, case, ctx)
    except (Exception, SystemExit) as e:
        raise LearnerError(
            f"case '{case.name}' ({case.note}) raised an exception:\n{trimmed_traceback(e, path)}"
        ) from None


def grade(exercise_dir: Path, path: Path, ctx: Context, refs: Path, progress: Progress) -> dict[str, Any]:
    """Grade one file -> {status, cases: [{name, ok, message, mistake}], detail, reference}."""
    cases = load_cases_module(exercise_dir)
    model_path = ctx.model_path if cases.NEEDS_MODEL else None
    meta = references.load_meta(refs, exercise_dir.name)
    if meta is None:
        return {"status": "no-reference", "detail": f"no reference recorded in {refs}; run `{references.RECORD_COMMAND}`."}
    stale = references.staleness(meta, exercise_dir, model_path)
    if stale:
        return {"status": "stale", "detail": stale, "reference": references.describe(meta)}
    data = references.load_data(refs, exercise_dir.name)
    result: dict[str, Any] = {"reference": references.describe(meta), "cases": []}
    if cases.NEEDS_MODEL:
        try:
            ctx.model()
        except ModelUnavailable as e:
            return {**result, "status": "no-model", "detail": str(e)}
    try:
        fns = functions_of(import_file(path, f"learner_{exercise_dir.name.replace('-', '_')}"), cases.FUNCTIONS, path)
        for case in cases.cases(ctx):
            progress(case.name)
            got = run_case(cases, fns, case, ctx, path)
            message = cases.check(got, data["expected"][case.name], case)
            mistake = None
            if message is not None:
                mistake = next((
                    cases.MISTAKES[int(i)].message for i, outputs in data["mistakes"].items()
                    if case.name in outputs and cases.check(got, outputs[case.name], case) is None
                ), None)
            result["cases"].append({"name": case.name, "note": case.note, "ok": message is None,
                                    "message": message, "mistake": mistake})
    except LearnerError as e:
        result.update(status="error", detail=e.text)
        return result
    result["status"] = "pass" if all(c["ok"] for c in result["cases"]) else "fail"
    return result


def record(exercise_dir: Path, ctx: Context, refs: Path, progress: Progress) -> dict[str, Any]:
    """Run the solution (and every modelled mistake) on every case; save outputs and metadata."""
    cases = load_cases_module(exercise_dir)
    solution = functions_of(import_file(exercise_dir / "solution.py", "solution"), cases.FUNCTIONS, exercise_dir / "solution.py")
    expected, mistakes = {}, {}
    for case in cases.cases(ctx):
        progress(case.name)
        got = cases.call(solution, case, ctx)
        expected[case.name] = cases.expected(case, ctx) if hasattr(cases, "expected") else got
        problem = cases.check(got, expected[case.name], case)
        if problem:
            raise RuntimeError(f"{exercise_dir.name}: the solution fails its own case '{case.name}': {problem}")
    mistake_ctx = Context(ctx.device, ctx.model_path, trials_scale=4, _model=ctx._model)
    for i, mistake in enumerate(cases.MISTAKES):
        fns = SimpleNamespace(**{**vars(solution), **mistake.functions})
        outputs = {}
        for case in cases.cases(mistake_ctx):
            try:
                out = cases.call(fns, case, mistake_ctx)
            except Exception:
                continue
            if hasattr(cases, "expected"):
                out = out + 0.5  # smoothed counts: a model of the mistake's distribution
            if cases.check(out, expected[case.name], case) is not None:
                outputs[case.name] = out
        mistakes[str(i)] = outputs
    meta = references.make_meta(exercise_dir, ctx.device, ctx.model_path if cases.NEEDS_MODEL else None)
    references.save(refs, exercise_dir.name, meta, {"expected": expected, "mistakes": mistakes})
    return {"status": "recorded", "reference": references.describe(meta)}


def main(jobs_file: str, results_file: str) -> None:
    spec = json.loads(Path(jobs_file).read_text())
    torch.set_num_threads(int(spec.get("threads", 1)))
    ctx = Context(spec["device"], Path(spec["model_path"]))
    refs = Path(spec["references"])
    with open(results_file, "a") as out:
        def emit(obj: dict[str, Any]) -> None:
            out.write(json.dumps(obj) + "\n")
            out.flush()

        emit({"ready": True})
        for job in spec["jobs"]:
            start = time.perf_counter()
            progress = lambda case, job=job: emit({"progress": job["id"], "case": case})  # noqa: E731
            try:
                if spec["mode"] == "record":
                    result = record(Path(job["exercise"]), ctx, refs, progress)
                else:
                    result = grade(Path(job["exercise"]), Path(job["file"]).resolve(), ctx, refs, progress)
            except ModelUnavailable as e:
                result = {"status": "no-model", "detail": str(e)}
            except Exception:
                result = {"status": "internal", "detail": traceback.format_exc()}
            emit({"id": job["id"], "seconds": round(time.perf_counter() - start, 3), **result})


if __name__ == "__main__":
    main(*sys.argv[1:3])
