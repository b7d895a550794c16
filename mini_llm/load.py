"""Load a model or tokenizer by short name (a folder under `models/`) or by path."""
from __future__ import annotations

from collections.abc import Sequence
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
    name_or_path: str | Path = DEFAULT_MODEL, dtype: torch.dtype | str = torch.float32, device: torch.device | str = "cpu"
) -> Transformer:
    """`load_model("tiny-qwen3")`, `load_model("models/Qwen3-0.6B", dtype="bfloat16", device="cuda")`: an
    eval-mode Transformer. dtype: a torch dtype or its name."""
    if isinstance(dtype, str):
        named = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(named, torch.dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch dtype (e.g. torch.bfloat16 or \"bfloat16\")")
        dtype = named
    return Transformer.from_pretrained(resolve_model_path(name_or_path), dtype=dtype, device=device)


class Tokenizer:
    """Text <-> token ids with a model folder's `tokenizer.json`, the file `transformers.AutoTokenizer` reads.

    It calls the `tokenizers` library directly: importing transformers costs seconds in every process (each
    notebook kernel, each CLI run), and encode / decode here give AutoTokenizer's ids and text (tested).
    """

    def __init__(self, folder: str | Path) -> None:
        import tokenizers

        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer.json in {folder}: a model folder needs one next to config.json")
        try:
            self._tok = tokenizers.Tokenizer.from_file(str(path))
        except Exception as err:  # the library raises a bare Exception on malformed JSON
            raise ValueError(f"{path} is not a valid tokenizer file: {err}") from err
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"Tokenizer({str(self.folder)!r}, vocabulary {self.vocab_size:,})"

    @property
    def vocab_size(self) -> int:
        """Entries in the vocabulary, special tokens included."""
        return self._tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (special tokens as the file's post-processor adds them, like AutoTokenizer)."""
        return self._tok.encode(text).ids

    def decode(self, ids: int | Sequence[int] | torch.Tensor) -> str:
        """The text of token ids (a list, a 1-d tensor or one id); special tokens are kept, as in AutoTokenizer."""
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else ids
        return self._tok.decode([ids] if isinstance(ids, int) else [int(i) for i in ids], skip_special_tokens=False)

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, special tokens included."""
        return self._tok.get_vocab(with_added_tokens=True)


def load_tokenizer(name_or_path: str | Path = DEFAULT_MODEL) -> Tokenizer:
    """The tokenizer of a model folder (by short name or path), offline."""
    return Tokenizer(resolve_model_path(name_or_path))
