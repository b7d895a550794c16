"""Recorded reference outputs: `references/NN-slug.pt` (outputs) + `NN-slug.json` (how they were recorded).

torch is imported inside the functions that need it, so reading the metadata costs no torch import.
"""
from __future__ import annotations

import hashlib
import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RECORD_COMMAND = "python practice/judge.py record"


def sha256_of(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def model_fingerprint(model_path: Path) -> str | None:
    """sha256 over the folder's *.safetensors (sorted) and config.json; None if the model is absent."""
    files = sorted(model_path.glob("*.safetensors"))
    if not files or not (model_path / "config.json").exists():
        return None
    return sha256_of([*files, model_path / "config.json"])


SHARED_INPUTS = ("gen.py", "repro.py", "devices.py", "values.py", "drafters.py", "rejection.py")


def case_files(exercise_dir: Path) -> list[Path]:
    """The files that define an exercise's inputs and how its outputs are read: its cases.py and the shared
    judgekit modules SHARED_INPUTS (generated inputs, reproducibility runs, the device rule, the type policy, the
    judge's drafters, the exact laws of recursive rejection)."""
    return [exercise_dir / "cases.py", *(Path(__file__).with_name(f) for f in SHARED_INPUTS)]


def device_name(device: str) -> str:
    """The device as the hardware names itself: the GPU's name, or the CPU's model name."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
        return f"CPU {model}"
    except (OSError, StopIteration):
        return f"CPU ({platform.machine() or platform.processor()})"


def measured_dtype(model: Any, outputs: dict[str, Any]) -> str:
    """The floating dtype actually used: the model's parameters, else the recorded float tensors' dtypes."""
    import torch

    if model is not None:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    found = set()

    def visit(x: Any) -> None:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            found.add(str(x.dtype).removeprefix("torch."))
        elif isinstance(x, float):
            found.add("float64 (Python float)")
        elif isinstance(x, (list, tuple)):
            for v in x:
                visit(v)

    for value in outputs.values():
        visit(value)
    return "+".join(sorted(found)) or "no floating-point tensors"


def make_meta(exercise_dir: Path, device: str, model_path: Path | None, dtype: str, seconds: float) -> dict[str, Any]:
    """How a reference was recorded, measured here: device name, dtype used, torch/CUDA versions, solution time."""
    import torch

    meta = {
        "exercise": exercise_dir.name,
        "device": device,
        "device_name": device_name(device),
        "dtype": dtype,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.startswith("cuda") else None,
        "python": platform.python_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "solution_seconds": round(seconds, 4),
        "cases_sha256": sha256_of(case_files(exercise_dir)),
        "solution_sha256": sha256_of([exercise_dir / "solution.py"]),
    }
    if model_path is not None:
        meta["model"] = model_path.name
        meta["model_sha256"] = model_fingerprint(model_path)
    return meta


def save(references: Path, name: str, meta: dict[str, Any], data: dict[str, Any]) -> None:
    """Write NN-slug.pt and NN-slug.json, the latter with the sha256 of the former."""
    import torch

    references.mkdir(parents=True, exist_ok=True)
    torch.save(data, references / f"{name}.pt")
    meta = {**meta, "data_sha256": sha256_of([references / f"{name}.pt"])}
    (references / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_meta(references: Path, name: str) -> dict[str, Any] | None:
    path = references / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def integrity(meta: dict[str, Any], references: Path, name: str) -> str | None:
    """Why NN-slug.pt cannot be trusted (missing, or not the file its .json describes), or None."""
    path = references / f"{name}.pt"
    restore = (f"restore it with `git checkout -- {path}` (if it is the shipped one) or re-record it with "
               f"`{RECORD_COMMAND} {name[:2]}`")
    if not path.exists():
        return f"the reference file {path} is missing; {restore}."
    if meta.get("data_sha256") != sha256_of([path]):
        return (f"the reference file {path} was changed since it was recorded (its sha256 differs from the one in "
                f"{name}.json); {restore}.")
    return None


def load_data(references: Path, name: str) -> dict[str, Any]:
    import torch

    return torch.load(references / f"{name}.pt", weights_only=True)


def staleness(meta: dict[str, Any], exercise_dir: Path, model_path: Path | None) -> str | None:
    """Why the recorded reference no longer fits this exercise or checkpoint, or None if it does."""
    if meta.get("cases_sha256") != sha256_of(case_files(exercise_dir)) or meta.get(
        "solution_sha256"
    ) != sha256_of([exercise_dir / "solution.py"]):
        return (f"the reference was recorded for an older version of this exercise (its cases.py, solution.py or "
                f"the judgekit modules in references.SHARED_INPUTS changed since {meta.get('date')}); run `{RECORD_COMMAND}`.")
    if model_path is None:
        return None
    now = model_fingerprint(model_path)
    if now is None:
        return f"this exercise needs the model in {model_path}, which is not there (see `python practice/judge.py doctor`)."
    if meta.get("model_sha256") != now:
        return (f"the reference was recorded for a different checkpoint (model sha256 "
                f"{str(meta.get('model_sha256'))[:12]}... on {meta.get('date')}; {model_path} now has "
                f"{now[:12]}...); run `{RECORD_COMMAND}`.")
    return None


def describe(meta: dict[str, Any]) -> str:
    """'reference recorded on <device name> (<device>, <dtype>, torch X[, CUDA Y], <date>)'."""
    cuda = f", CUDA {meta['cuda']}" if meta.get("cuda") else ""
    return (f"reference recorded on {meta['device_name']} ({meta['device']}, {meta['dtype']}, "
            f"torch {meta['torch']}{cuda}, {meta['date'][:10]})")

