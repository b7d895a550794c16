"""Runs in a worker process, one file per process (forked by judgekit.zygote, or started as below): imports the
learner's (or the solution's) file, runs every case and writes the RAW outputs; or, for maintainers, records
the references from the solution.

Usage: python -m practice.judgekit.worker JOB.json OUTDIR
It appends JSON lines to OUTDIR/results.jsonl: {"ready": true} once the model is loaded, {"progress": case}
before each case, {"case": name, "output": tree} after it (tensors in OUTDIR/case-<i>.safetensors), then
{"done": true}, or {"error": text} when the learner's code failed. It never grades: the parent process
(judgekit.grading), which never imports learner code, compares the outputs with the references.
"""
from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from safetensors.torch import save_file

from . import references, wire
from .guard import guarded
from .spec import Case, Context, ModelUnavailable


class LearnerError(Exception):
    """The learner's code failed; `text` is the trimmed, learner-facing explanation."""

    def __init__(self, text: str, out_of_memory: bool = False, in_case: bool = False) -> None:
        super().__init__(text)
        self.text = text
        self.out_of_memory = out_of_memory
        self.in_case = in_case


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text.lower()


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
        raise LearnerError(f"importing {path.name} failed:\n{trimmed_traceback(e, path)}", is_out_of_memory(e)) from None
    return module


def functions_of(module: ModuleType, names: tuple[str, ...], path: Path, log: list[str]) -> SimpleNamespace:
    """The named functions, each checking after every call that it left its arguments unchanged (into `log`)."""
    missing = [n for n in names if not callable(getattr(module, n, None))]
    if missing:
        raise LearnerError(f"{path.name} must define {', '.join(f'`{n}`' for n in missing)} (see the exercise's README).")
    return SimpleNamespace(**{n: guarded(getattr(module, n), n, log) for n in names})


def load_cases_module(exercise_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cases_{exercise_dir.name.replace('-', '_')}", exercise_dir / "cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(cases: ModuleType, fns: SimpleNamespace, case: Case, ctx: Context, path: Path) -> Any:
    """cases.call on one case; an exception becomes a LearnerError holding the learner's frames (the parent
    names the case, from the last progress event)."""
    try:
        return cases.call(fns, case, ctx)
    except (Exception, SystemExit) as e:
        raise LearnerError(trimmed_traceback(e, path), is_out_of_memory(e), in_case=True) from None


def cap_memory(extra_mb: int) -> int | None:
    """Limit this process's address space to its current size + extra_mb MiB -> the cap in MiB (None: no cap).

    Not on CUDA, whose driver reserves far more virtual address space than it uses.
    """
    if extra_mb <= 0:
        return None
    with open("/proc/self/statm") as statm:
        current = int(statm.read().split()[0]) * resource.getpagesize()
    limit = current + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return limit // 2**20


def grade(job: dict[str, Any], ctx: Context, emit, outdir: Path) -> None:
    """Run the learner's file on every case, emitting raw outputs; LearnerError ends the job."""
    exercise_dir, path = Path(job["exercise"]), Path(job["file"]).resolve()
    cases = load_cases_module(exercise_dir)
    if cases.NEEDS_MODEL:
        ctx.model()
    if ctx.device == "cpu":
        cap_memory(int(job.get("memory_mb", 0)))
    emit({"ready": True})
    log: list[str] = []
    fns = functions_of(import_file(path, f"learner_{exercise_dir.name.replace('-', '_')}"), cases.FUNCTIONS, path, log)
    for i, case in enumerate(cases.cases(ctx)):
        emit({"progress": case.name})
        log.clear()
        got = run_case(cases, fns, case, ctx, path)
        tensors: dict[str, torch.Tensor] = {}
        tree = wire.encode(got, tensors)
        if tensors:
            save_file(tensors, str(outdir / f"case-{i}.safetensors"))
        emit({"case": case.name, "output": tree, **({"mutated": log[0]} if log else {})})


def smoothed(counts: Any) -> Any:
    """Counts + 0.5 (tensors, also inside tuples): a model of a mistake's distribution with no empty bin."""
    if isinstance(counts, torch.Tensor):
        return counts + 0.5
    return tuple(smoothed(c) for c in counts) if isinstance(counts, tuple) else counts


def record(job: dict[str, Any], ctx: Context, emit) -> dict[str, Any]:
    """Run the solution (and every modelled mistake) on every case; save outputs and measured metadata."""
    exercise_dir = Path(job["exercise"])
    cases = load_cases_module(exercise_dir)
    log: list[str] = []
    solution = functions_of(import_file(exercise_dir / "solution.py", "solution"), cases.FUNCTIONS,
                            exercise_dir / "solution.py", log)
    if cases.NEEDS_MODEL:
        ctx.model()
    emit({"ready": True})
    expected, outputs = {}, {}
    start = time.perf_counter()
    for case in cases.cases(ctx):
        emit({"progress": case.name})
        outputs[case.name] = cases.call(solution, case, ctx)
        if log:
            raise RuntimeError(f"{exercise_dir.name}: in case '{case.name}' the solution {log[0]}")
    seconds = time.perf_counter() - start
    for case in cases.cases(ctx):
        got = outputs[case.name]
        expected[case.name] = cases.expected(case, ctx) if hasattr(cases, "expected") else got
        problem = cases.check(got, expected[case.name], case)
        if problem:
            raise RuntimeError(f"{exercise_dir.name}: the solution fails its own case '{case.name}': {problem}")
    mistake_ctx = Context(ctx.device, ctx.model_path, trials_scale=4, _model=ctx._model)
    mistakes = {}
    for i, mistake in enumerate(cases.MISTAKES):
        fns = SimpleNamespace(**{**vars(solution), **mistake.functions})
        found = {}
        for case in cases.cases(mistake_ctx):
            try:
                out = cases.call(fns, case, mistake_ctx)
            except Exception:
                continue
            if cases.check(out, expected[case.name], case) is not None:  # decided on the counts as drawn
                found[case.name] = smoothed(out) if hasattr(cases, "expected") else out
        mistakes[str(i)] = found
    model = ctx._model if cases.NEEDS_MODEL else None
    meta = references.make_meta(exercise_dir, ctx.device, ctx.model_path if cases.NEEDS_MODEL else None,
                                dtype=references.measured_dtype(model, expected), seconds=seconds)
    references.save(Path(job["references"]), exercise_dir.name, meta, {"expected": expected, "mistakes": mistakes})
    return {"reference": references.describe(meta)}


def main(job_file: str, outdir: str) -> None:
    job = json.loads(Path(job_file).read_text())
    torch.set_num_threads(int(job.get("threads", 1)))
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 on a GPU means float32: references stay comparable
    torch.backends.cudnn.allow_tf32 = False
    ctx = Context(job["device"], Path(job["model_path"]))
    out = open(Path(outdir) / "results.jsonl", "a")

    def emit(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        if job["mode"] == "record":
            emit({"done": True, **record(job, ctx, emit)})
        else:
            grade(job, ctx, emit, Path(outdir))
            emit({"done": True})
    except LearnerError as e:
        emit({"error": e.text, "out_of_memory": e.out_of_memory, "in_case": e.in_case})
    except ModelUnavailable as e:
        emit({"no_model": str(e)})
    except Exception:
        emit({"internal": traceback.format_exc()})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # do not wait for threads the learner's code left running


if __name__ == "__main__":
    main(*sys.argv[1:3])
