"""The drafters the tuner and the benchmark know by name, built plain or with what the tuner saved.

`tuned_drafter(name, target)` rebuilds a drafter with its tuned shape and draft vocabulary from
models/tuned/<name>.json. The reduced draft vocabulary of size N is the N most frequent target tokens on training
text (`token_order`; EAGLE-3's d2t idea).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from mini_llm import Transformer, load_model
from mini_llm.load import MODELS_DIR

from ..analysis.prompts import training_windows
from ..analysis.tuned import TUNED_DIR, dynamic_setting, load_tuned
from ..drafters.base import Drafter
from ..drafters.head_io import load_head
from ..drafters.model import ModelDrafter, QuantizedSelfDrafter

DRAFTERS = ("small-model", "int4-self", "medusa", "eagle", "eagle3", "mtp")
HEAD_FOLDERS = {"medusa": "medusa", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"}
DYNAMIC_DRAFTERS = ("eagle", "eagle3")  # drafters whose EAGLE-2 dynamic tree is tuned too (the "dynamic" entry)


def frequent_tokens(tokenizer, vocab_size: int, windows: int = 256, length: int = 256) -> list[int]:
    """All token ids [vocab_size], most frequent first, counted on training windows (never held-out text).

    The first N of them are the reduced draft vocabulary of size N.
    """
    ids = training_windows(tokenizer, windows, length, seed=0).flatten()
    counts = torch.bincount(ids, minlength=vocab_size)[:vocab_size]
    return sorted(range(vocab_size), key=lambda t: (-int(counts[t]), t))


def vocab_coverage(tokens: Sequence[int], vocab: torch.Tensor | Sequence[int]) -> float:
    """The share of `tokens` (e.g. what the target wrote) inside the draft vocabulary `vocab`: a drafter that proposes
    only those ids can match the target at most that often per position."""
    inside = set(torch.as_tensor(vocab).tolist())
    return sum(t in inside for t in tokens) / max(len(tokens), 1)


def token_order(model_name: str, tokenizer, vocab_size: int) -> list[int]:
    """`frequent_tokens` for this model, cached in models/tuned/token_frequency-<model>.json."""
    path = TUNED_DIR / f"token_frequency-{Path(model_name).name}.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if len(saved["order"]) == vocab_size:
            return saved["order"]
    order = frequent_tokens(tokenizer, vocab_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": model_name, "source": "training_windows(tokenizer, 256, 256, seed=0)",
                                "order": order}) + "\n")
    return order


def make_drafter(name: str, target: Transformer, draft: Transformer | str | None = "tiny-qwen3-draft",
                 heads_dir: str | Path = MODELS_DIR / "heads", draft_vocab: torch.Tensor | None = None) -> Drafter:
    """The drafter called `name` (one of DRAFTERS) for `target`; raises FileNotFoundError / ValueError when
    its model or head is missing or does not fit the target."""
    if name == "small-model":
        if draft is None:
            raise FileNotFoundError("no small draft model")
        model = load_model(draft) if isinstance(draft, (str, Path)) else draft
        if model.cfg.vocab_size != target.cfg.vocab_size:
            raise ValueError(f"the small draft's vocabulary ({model.cfg.vocab_size}) != the target's")
        return ModelDrafter(model)
    if name == "int4-self":
        return QuantizedSelfDrafter(target)
    if name in HEAD_FOLDERS:
        return load_head(Path(heads_dir) / HEAD_FOLDERS[name], target, draft_vocab)
    raise ValueError(f"unknown drafter {name!r}; choose from {DRAFTERS}")


def tuned_drafter(name: str, target: Transformer, draft: Transformer | str | None = "tiny-qwen3-draft",
                  heads_dir: str | Path = MODELS_DIR / "heads", folder: str | Path = TUNED_DIR,
                  model_name: str = "tiny-qwen3") -> tuple[Drafter, list[int]] | None:
    """(drafter with its tuned draft vocabulary, tuned branching) from models/tuned/<name>.json; None when
    there is no tuning for this drafter and target."""
    tuned = load_tuned(name, folder)
    if tuned is None or tuned.get("target") != model_name:
        return None
    vocab = _saved_vocab(tuned.get("draft_vocab"), folder, model_name)
    return make_drafter(name, target, draft, heads_dir, vocab), list(tuned["branching"])


def tuned_dynamic(name: str, target: Transformer, heads_dir: str | Path = MODELS_DIR / "heads",
                  folder: str | Path = TUNED_DIR, model_name: str = "tiny-qwen3") -> tuple[Drafter, dict] | None:
    """(head drafter with its tuned draft vocabulary, {depth, width, total_tokens}) of EAGLE-2's tuned dynamic tree
    (the "dynamic" entry of models/tuned/<name>.json); None when none was tuned for this target."""
    tuned = load_tuned(name, folder)
    if tuned is None or tuned.get("target") != model_name or not tuned.get("dynamic"):
        return None
    saved = tuned["dynamic"]
    vocab = _saved_vocab(saved.get("draft_vocab"), folder, model_name)
    return make_drafter(name, target, None, heads_dir, vocab), dynamic_setting(saved)


def _saved_vocab(size: int | None, folder: str | Path, model_name: str) -> torch.Tensor | None:
    """The `size` most frequent target tokens saved beside the tunings (None: the full vocabulary)."""
    if not size:
        return None
    order = json.loads((Path(folder) / f"token_frequency-{Path(model_name).name}.json").read_text())["order"]
    return torch.tensor(order[:size], device="cpu")
