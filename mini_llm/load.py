"""Load a model or tokenizer by short name (a folder under `models/`) or by path."""
from __future__ import annotations

from pathlib import Path

import torch

from .model import Transformer

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = "tiny-qwen3"


def resolve_model_path(name_or_path: str | Path = DEFAULT_MODEL) -> Path:
    """A folder path as given, or `models/<name>`; the error lists the models that are present."""
    path = Path(name_or_path)
    if path.is_dir():
        return path
    if (MODELS_DIR / path).is_dir():
        return MODELS_DIR / path
    present = sorted(p.name for p in MODELS_DIR.iterdir() if (p / "config.json").exists()) if MODELS_DIR.is_dir() else []
    raise FileNotFoundError(
        f"model {str(name_or_path)!r} not found (neither a folder nor models/{name_or_path}); "
        f"present in {MODELS_DIR}: {present or 'none'}"
    )


def load_model(
    name_or_path: str | Path = DEFAULT_MODEL, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
) -> Transformer:
    """`load_model("tiny-qwen3")`, `load_model("models/Qwen3-0.6B", device="cuda")`: an eval-mode Transformer."""
    return Transformer.from_pretrained(resolve_model_path(name_or_path), dtype=dtype, device=device)


def load_tokenizer(name_or_path: str | Path = DEFAULT_MODEL):
    """The model folder's tokenizer through `transformers.AutoTokenizer`, offline."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(resolve_model_path(name_or_path)), local_files_only=True)
