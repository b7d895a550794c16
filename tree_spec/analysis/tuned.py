"""Tuned settings: the defaults used when nothing was tuned, and what `python -m tree_spec.tools.tune` saved
(models/tuned/<drafter>.json: a drafter's tuned shape, draft vocabulary and rank profile), read back."""
from __future__ import annotations

import json
from pathlib import Path

from mini_llm.load import MODELS_DIR

from .ranks import RankProfile

TUNED_DIR = MODELS_DIR / "tuned"
# EAGLE-2's confidence rule on a chain: draft up to k while the draft's path probability (its estimate of the
# chance that every draft so far is accepted) stays >= min_path_prob. Another draft pays when that chance times
# what a token is worth beats a draft call: on the reference CPU a head call costs ~0.9 ms and a token ~3 ms,
# hence ~0.3. The tuner's default (k, θ), and the benchmark's when nothing was tuned.
CONFIDENCE_STOP = dict(k=6, min_path_prob=0.3)
FIXED_DYNAMIC = dict(depth=6, width=4, total_tokens=24)  # the fixed EAGLE-2 setting (the benchmark's, notebook 03's)


def dynamic_setting(row: dict) -> dict:
    """An EAGLE-2 setting read from a row or a saved entry: {depth, width, total_tokens} (the keys of
    `FIXED_DYNAMIC`), and min_path_prob when the setting stops its expansion early (Dynamic Depth Decoding)."""
    setting = {k: row[k] for k in FIXED_DYNAMIC}
    if row.get("min_path_prob"):
        setting["min_path_prob"] = row["min_path_prob"]
    return setting


def load_tuned(name: str, folder: str | Path = TUNED_DIR) -> dict | None:
    """The saved tuning of drafter `name` (models/tuned/<name>.json), or None."""
    path = Path(folder) / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def load_profile(name: str = "small-model", folder: str | Path = TUNED_DIR) -> RankProfile | None:
    """The rank profile saved with drafter `name`'s tuning (default: the shipped small draft's), or None."""
    tuned = load_tuned(name, folder)
    return None if tuned is None else RankProfile.from_dict(tuned["profile"])
