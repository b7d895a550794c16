"""Recorded reference outputs: `references/NN-slug.pt` (outputs) + `NN-slug.json` (how they were recorded)."""
from __future__ import annotations

import hashlib
import json
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

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


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({platform.machine()})"


def make_meta(exercise_dir: Path, device: str, model_path: Path | None) -> dict[str, Any]:
    meta = {
        "exercise": exercise_dir.name,
        "device": device,
        "device_name": device_name(device),
        "dtype": "float32",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cases_sha256": sha256_of([exercise_dir / "cases.py"]),
        "solution_sha256": sha256_of([exercise_dir / "solution.py"]),
    }
    if model_path is not None:
        meta["model"] = model_path.name
        meta["model_sha256"] = model_fingerprint(model_path)
    return meta


def save(references: Path, name: str, meta: dict[str, Any], data: dict[str, Any]) -> None:
    references.mkdir(parents=True, exist_ok=True)
    torch.save(data, references / f"{name}.pt")
    (references / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_meta(references: Path, name: str) -> dict[str, Any] | None:
    path = references / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def load_data(references: Path, name: str) -> dict[str, Any]:
    return torch.load(references / f"{name}.pt", weights_only=True)


def staleness(meta: dict[str, Any], exercise_dir: Path, model_path: Path | None) -> str | None:
    """Why the recorded reference no longer fits this exercise or checkpoint, or None if it does."""
    if meta.get("cases_sha256") != sha256_of([exercise_dir / "cases.py"]) or meta.get(
        "solution_sha256"
    ) != sha256_of([exercise_dir / "solution.py"]):
        return (f"the reference was recorded for an older version of this exercise (its cases.py or "
                f"solution.py changed since {meta.get('date')}); run `{RECORD_COMMAND}`.")
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
    """'reference recorded on <device name> (<device>, float32, torch X, <date>)'."""
    return (f"reference recorded on {meta['device_name']} ({meta['device']}, {meta['dtype']}, "
            f"torch {meta['torch']}, {meta['date'][:10]})")

