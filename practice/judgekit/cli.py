"""Subcommands of `python practice/judge.py`; each returns the process exit code."""
from __future__ import annotations

import argparse
import platform
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import capstone_status, references, report
from .catalog import Exercise, discover, resolve
from .grading import grade_file, graded_on, reference_problem
from .progress import Progress
from .runner import Job, start
from .settings import REPO, Settings

RECORD_TIMEOUT_S = 600.0  # per exercise: recording also samples every modelled mistake
CHECK_PARALLEL = 2  # workers `check` runs at once (each file gets a fresh one)


def shown(path: Path) -> str:
    """A path relative to the repository when it is inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def workspace_file(settings: Settings, ex: Exercise) -> Path:
    return settings.workspace / f"{ex.name}.py"


def cmd_list(settings: Settings, exercises: list[Exercise]) -> int:
    """Every exercise's state against its current workspace file; the bar counts the files that pass as they are."""
    progress = Progress.load(settings.workspace)
    states = {ex.name: progress.state(ex.name, workspace_file(settings, ex)) for ex in exercises}
    for ex in exercises:
        print(f"  {ex.number:2d}  {ex.slug:<22} {states[ex.name]:<8} {ex.title}")
    print(capstone_status.list_line(settings, len(exercises) + 1))
    print(report.progress_bar(sum(state == "solved" for state in states.values()), len(exercises)))
    if "changed" in states.values():
        print("changed: your workspace file is not a file that passed (edited since, or another file passed); "
              "`python practice/judge.py test N` grades it as it is now.")
    if "elsewhere" in states.values():
        print("elsewhere: another file passed, and there is no workspace file; `list` and the capstone go by the "
              "workspace file (`python practice/judge.py start N` makes one).")
    return 0


def cmd_start(settings: Settings, ex: Exercise) -> int:
    target = workspace_file(settings, ex)
    print(ex.task())
    if target.exists():
        print(f"{shown(target)} already exists: keeping your work (delete it yourself to start over).")
    else:
        settings.workspace.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ex.folder / "starter.py", target)
        print(f"Your file: {shown(target)}")
    print(f"Test it:   python practice/judge.py test {ex.number}")
    return 0


def cmd_test(settings: Settings, ex: Exercise, file: str | None) -> int:
    path = Path(file) if file else workspace_file(settings, ex)
    if not path.exists():
        print(f"{shown(path)} does not exist; run `python practice/judge.py start {ex.number}` first.")
        return 1
    result = grade_file(ex, path, settings)
    print(report.verdict(result, f"{ex.name} · {shown(path)}"))
    if result["status"] != "pass":
        return 1
    progress = Progress.load(settings.workspace)
    progress.record_pass(ex.name, path)
    progress.save(settings.workspace)
    print(f"Solved. Compare with the reference solution: python practice/judge.py solution {ex.number}")
    own = workspace_file(settings, ex)
    if path.resolve() != own.resolve():
        state = {"solved": "keeps its pass", "changed": "has not passed as it is now",
                 "elsewhere": "does not exist"}[progress.state(ex.name, own)]
        print(f"This pass is kept for {shown(path)}, beside any earlier one; your workspace file {shown(own)} "
              f"{state}, and `list` and the capstone go by the workspace file.")
    return 0


def cmd_hint(settings: Settings, ex: Exercise) -> int:
    hints = ex.hints()
    progress = Progress.load(settings.workspace)
    n = min(progress.hints.get(ex.name, 0) + 1, len(hints))
    for i, hint in enumerate(hints[:n], 1):
        print(f"Hint {i}/{len(hints)}: {hint}")
    if n == len(hints):
        print("That was the last hint.")
    progress.hints[ex.name] = n
    progress.save(settings.workspace)
    return 0


def cmd_solution(settings: Settings, ex: Exercise, force: bool) -> int:
    if ex.name not in Progress.load(settings.workspace).passed and not force:
        print(f"Pass exercise {ex.number} first (python practice/judge.py test {ex.number}), "
              f"or add --force to see the solution anyway.")
        return 1
    print((ex.folder / "solution.py").read_text())
    return 0


def check_jobs(exercises: list[Exercise]) -> list[tuple[Job, str, bool]]:
    """(job, role, should_pass): every solution must pass; every starter and wrong solution must fail."""
    jobs = []
    for ex in exercises:
        jobs.append((Job(ex, ex.folder / "solution.py"), "solution", True))
        jobs.append((Job(ex, ex.folder / "starter.py"), "starter", False))
        jobs += [(Job(ex, path), f"wrong/{path.name}", False) for path in ex.wrong_files()]
    return jobs


def first_diagnosis(result: dict) -> str:
    """The likely mistake (with the rule the first failing case shows broken), else the first failing case's
    message, else the detail's first and last lines (an exception's, then the rule its case checks)."""
    failing = [c for c in result.get("cases", []) if not c["ok"]]
    if result.get("mistake"):
        rule = next((c["rule"] for c in failing if c.get("rule")), None)
        return result["mistake"] + (f" Rule: {rule}." if rule else "")
    if failing:
        return " ".join(failing[0]["message"].split())
    lines = (result.get("detail") or "").strip().splitlines()
    if lines and lines[-1].startswith("Rule this case checks:") and len(lines) > 2:
        return f"{lines[0]} ... {lines[-2]} {lines[-1]}"
    if len(lines) > 1 and lines[0].startswith("Case "):
        return f"{lines[0]} ... {lines[-1]}"
    return lines[-1] if lines else ""


def cmd_check(settings: Settings, exercises: list[Exercise]) -> int:
    """Every solution passes, every starter and wrong file fails; a fresh worker (and model) per file."""
    planned = check_jobs(exercises)
    with ThreadPoolExecutor(CHECK_PARALLEL) as pool:
        results = list(pool.map(lambda p: grade_file(p[0].exercise, p[0].file, settings), planned))
    failures = 0
    for (job, role, should_pass), result in zip(planned, results):
        passed = result["status"] == "pass"
        good = passed == should_pass and (should_pass or result["status"] in ("fail", "error", "timeout", "memory"))
        failures += not good
        diagnosis = f"  -> {first_diagnosis(result)}" if role.startswith("wrong") else ""
        print(f"  {'ok ' if good else 'BAD'} {job.exercise.name:<24} {role:<28} {result['status']:<8}"
              f" {result.get('seconds', 0):5.1f} s{diagnosis}")
        if not good:
            print(report.verdict(result, f"{job.exercise.name} · {role}"))
    print(f"check: {len(planned) - failures}/{len(planned)} as expected")
    return 1 if failures else 0


def cmd_doctor(settings: Settings, exercises: list[Exercise]) -> int:
    """Python, torch, devices, models; per exercise whether it can be graded here and against what."""
    import torch

    print(f"Python   {platform.python_version()} ({sys.executable})")
    print(f"torch    {torch.__version__}" + (f" (CUDA {torch.version.cuda})" if torch.version.cuda else ""))
    cuda = torch.cuda.is_available()
    print(f"device   {'cuda: ' + torch.cuda.get_device_name(0) if cuda else 'cpu only (no CUDA GPU)'}")
    print(f"{graded_on(settings)} (SPEC_JUDGE_DEVICE)")
    models = REPO / "models"
    for folder in sorted(p for p in models.iterdir() if (p / "config.json").exists()) if models.is_dir() else []:
        print(f"model    {shown(folder)}")
    model_path = settings.model_path()
    model_ok = references.model_fingerprint(model_path) is not None
    print(f"graded with model {shown(model_path)}: {'present' if model_ok else 'MISSING'}")
    bad = 0
    for ex in exercises:
        meta = references.load_meta(settings.references, ex.name)
        problem = reference_problem(ex, settings, meta) if not (ex.needs_model and not model_ok) else None
        if ex.needs_model and not model_ok:
            state = "cannot be graded here: the model is missing"
        elif problem:
            state = f"NOT GRADABLE ({problem[0]}): {problem[1]}"
        else:
            state = f"gradable; {references.describe(meta)}"
        bad += state.startswith("NOT")
        print(f"  {ex.number:2d} {ex.slug:<22} {state}")
    return 1 if bad else 0


def out_of_date(settings: Settings, exercises: list[Exercise]) -> list[Exercise]:
    """The exercises whose reference is missing, altered, or stale for their files or the checkpoint."""
    return [ex for ex in exercises
            if reference_problem(ex, settings, references.load_meta(settings.references, ex.name))]


def record_device(requested: str) -> str | None:
    """'auto' -> cuda when there is a GPU, else cpu; 'cuda' without a GPU -> None."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested.startswith("cuda") and not torch.cuda.is_available():
        return None
    return requested


def cmd_record(settings: Settings, exercises: list[Exercise], requested: str = "auto") -> int:
    """Record each exercise's reference in a fresh worker on the chosen device."""
    if not exercises:
        print("Nothing to record: every reference is up to date.")
        return 0
    device = record_device(requested)
    if device is None:
        print(f"--device {requested}: no CUDA GPU is visible to torch here; nothing recorded.")
        return 1
    if device == "cpu":
        print("Recording the references on CPU" + (" (no CUDA GPU here)." if requested == "auto" else "."))
    bad = 0
    for ex in exercises:
        run = start(Job(ex, None), settings, "record", device, RECORD_TIMEOUT_S).wait()
        end = next((e for e in run.events if "done" in e or "internal" in e or "error" in e), {})
        run.tmp.cleanup()
        ok = "done" in end
        bad += not ok
        detail = end.get("reference") or end.get("internal") or end.get("error") or f"worker ended: {run.ended}"
        print(f"  {'ok ' if ok else 'BAD'} {ex.name:<24} {detail}")
    print(f"references in {shown(settings.references)} ({len(exercises) - bad}/{len(exercises)} recorded)")
    return 1 if bad else 0


def cmd_continue(settings: Settings, exercises: list[Exercise]) -> int:
    progress = Progress.load(settings.workspace)
    todo = [ex for ex in exercises if not progress.still_passes(ex.name, workspace_file(settings, ex))]
    if not todo:
        print("Every exercise is solved. Well done!")
        return 0
    ex = todo[0]
    print(f"Next unsolved exercise: {ex.number} ({ex.slug})\n")
    if workspace_file(settings, ex).exists():
        return cmd_test(settings, ex, None)
    return cmd_start(settings, ex)


def cmd_capstone(settings: Settings, solutions: bool, fast: bool, pieces: list[str]) -> int:
    from .capstone import command  # imports torch and the models: only for this command

    return command(settings, solutions, fast, pieces)


def to_record(settings: Settings, exercises: list[Exercise], only: list[str], stale: bool) -> list[Exercise]:
    chosen = [resolve(exercises, key) for key in only] or exercises
    return out_of_date(settings, chosen) if stale else chosen


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python practice/judge.py", description="Exercises on speculative decoding.")
    p.add_argument("--workspace", help="folder with your files (default practice/workspace; env SPEC_JUDGE_WORKSPACE)")
    p.add_argument("--references", help="references folder (default practice/references; env SPEC_JUDGE_REFERENCES)")
    p.add_argument("--model", help="model for the real-model exercises (default tiny-qwen3; env SPEC_JUDGE_MODEL)")
    p.add_argument("--timeout", type=float, help="seconds a file may run (default: 10x the reference solution's "
                   "time, at least 10; env SPEC_JUDGE_TIMEOUT)")
    p.add_argument("--memory", type=int, help="MiB a file may allocate beyond torch and the model (default 4096; "
                   "env SPEC_JUDGE_MEMORY_MB)")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("list", help="status of every exercise")
    for name, text in [("start", "copy the starter into the workspace and show the task"),
                       ("hint", "show one more hint")]:
        sub.add_parser(name, help=text).add_argument("exercise", help="number or slug")
    test = sub.add_parser("test", help="grade your file (or the given one)")
    test.add_argument("exercise", help="number or slug")
    test.add_argument("file", nargs="?", help="file to grade (default: your workspace file)")
    solution = sub.add_parser("solution", help="show the reference solution (after a pass)")
    solution.add_argument("exercise", help="number or slug")
    solution.add_argument("--force", action="store_true", help="show it without a pass")
    sub.add_parser("check", help="maintainer: solutions pass, starters and wrong solutions fail")
    sub.add_parser("doctor", help="Python, torch, device, models, what can be graded here")
    record = sub.add_parser("record", help="maintainer: re-record the references from the solutions")
    record.add_argument("only", nargs="*", help="exercises to record (default: all)")
    record.add_argument("--stale", action="store_true", help="only those whose reference is missing or out of date")
    record.add_argument("--device", default="auto", help="auto (cuda when present, else cpu), cpu or cuda")
    cap = sub.add_parser("capstone", help="your passing pieces assembled into one speculative decoder, run and timed")
    cap.add_argument("--solutions", action="store_true", help="maintainer: assemble the shipped solutions")
    cap.add_argument("--fast", action="store_true", help="2 prompts x 16 tokens, 100 samples (the test suite's mode; a pass is not recorded)")
    cap.add_argument("--piece", action="append", default=[], metavar="NN=FILE", help="take piece NN from FILE")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    settings = Settings.from_env(args.workspace, args.references, args.model, args.timeout, args.memory)
    exercises = discover(settings.exercises)
    try:
        ex = resolve(exercises, args.exercise) if getattr(args, "exercise", None) else None
    except LookupError as e:
        print(e)
        return 2
    commands = {
        None: lambda: cmd_continue(settings, exercises),
        "list": lambda: cmd_list(settings, exercises),
        "start": lambda: cmd_start(settings, ex),
        "test": lambda: cmd_test(settings, ex, args.file),
        "hint": lambda: cmd_hint(settings, ex),
        "solution": lambda: cmd_solution(settings, ex, args.force),
        "check": lambda: cmd_check(settings, exercises),
        "doctor": lambda: cmd_doctor(settings, exercises),
        "capstone": lambda: cmd_capstone(settings, args.solutions, args.fast, args.piece),
        "record": lambda: cmd_record(settings, to_record(settings, exercises, args.only, args.stale), args.device),
    }
    return commands[args.command]()
