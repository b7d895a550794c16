"""The training corpus (the running interpreter's standard library source) and its BPE tokenizer."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EOT = "<|endoftext|>"
HELD_OUT_PERCENT = 5


@dataclass
class Corpus:
    """Sorted stdlib `.py` files split by file into train and held-out sets (deterministic)."""

    root: Path
    train_files: list[Path]
    held_out_files: list[Path]
    include_tests: bool

    def describe(self) -> dict:
        return {
            "python": platform.python_version(),
            "stdlib": str(self.root),
            "include_tests": self.include_tests,
            "train_files": len(self.train_files),
            "held_out_files": len(self.held_out_files),
            "held_out_rule": f"sha1(relative path) % 100 < {HELD_OUT_PERCENT}",
        }


def _is_test_path(rel: Path) -> bool:
    return any(part in ("test", "tests", "idle_test") for part in rel.parts[:-1])


def is_held_out(rel_path: str) -> bool:
    """A file is held out iff the sha1 of its stdlib-relative path falls in the first 5 % of buckets."""
    return int(hashlib.sha1(rel_path.encode()).hexdigest(), 16) % 100 < HELD_OUT_PERCENT


def _python_files(root: Path) -> list[Path]:
    """The `.py` files under root, without descending into site-packages, dist-packages or __pycache__
    (site-packages holds the installed libraries, far more files than the stdlib itself)."""
    files = []
    for folder, subfolders, names in os.walk(root):
        at_top = Path(folder) == root
        subfolders[:] = [d for d in subfolders
                         if d != "__pycache__" and not (at_top and d in ("site-packages", "dist-packages"))]
        files += [Path(folder) / name for name in names if name.endswith(".py")]
    return files


def build_corpus(include_tests: bool = True, root: str | Path | None = None) -> Corpus:
    """List the stdlib's `.py` files (no site-packages), sorted, split by file. Same result every call."""
    root = Path(root or sysconfig.get_paths()["stdlib"])
    train, held_out = [], []
    for path in sorted(_python_files(root)):
        rel = path.relative_to(root)
        if not include_tests and _is_test_path(rel):
            continue
        (held_out if is_held_out(rel.as_posix()) else train).append(path)
    if not train or not held_out:
        raise RuntimeError(f"no Python source found under {root}")
    return Corpus(root, train, held_out, include_tests)


def read_texts(files: list[Path]) -> list[str]:
    """File contents; files that are not valid UTF-8 (a few test fixtures) are skipped."""
    texts = []
    for f in files:
        try:
            texts.append(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return texts


def train_tokenizer(texts: list[str], out_dir: str | Path, vocab_size: int = 4096, model_max_length: int = 4096):
    """Byte-level BPE with one special token, saved so that `AutoTokenizer.from_pretrained` loads it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    save_tokenizer(tok, out_dir, model_max_length)
    return tok


def save_tokenizer(tok, out_dir: str | Path, model_max_length: int = 4096) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOT,
        "bos_token": None,
        "pad_token": EOT,
        "unk_token": None,
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def encode_files(tok, texts: list[str]) -> np.ndarray:
    """One uint16 token stream: the files' tokens, each file followed by the end-of-text token."""
    eot = tok.token_to_id(EOT)
    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)
