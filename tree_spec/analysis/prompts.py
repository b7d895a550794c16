"""Token data from the stdlib corpus split: held-out prompts (bench, evaluation) and training windows."""
from __future__ import annotations

import torch

from mini_llm.corpus import build_corpus, read_texts


BENCH_PROMPTS = 16  # the benchmark's held-out prompts: `held_out_prompts(tokenizer, BENCH_PROMPTS)`
BENCH_NEW_TOKENS = 128  # the benchmark's new tokens per prompt; the tuner validates settings on as many


def held_out_prompts(tokenizer, n: int = BENCH_PROMPTS, chars: int = 600, avoid: int = 0) -> list[list[int]]:
    """n prompts of about `chars` characters, one per held-out file (evenly spread, fixed), each cut
    at 60 % of its file, starting at a line start and ending on a non-whitespace character.

    avoid: leave out the files of `held_out_prompts(tokenizer, avoid)` (the tuner's prompts avoid the benchmark's,
    so a setting is not chosen on the text it is then measured on)."""
    texts = [t for t in read_texts(build_corpus().held_out_files) if len(t) > 2 * chars]
    if avoid:
        used = {i * len(texts) // avoid for i in range(avoid)}
        texts = [t for i, t in enumerate(texts) if i not in used]
    if len(texts) < n:
        raise ValueError(f"only {len(texts)} held-out files are long enough for {n} prompts")
    prompts = []
    for i in range(n):
        text = texts[i * len(texts) // n]
        cut = int(len(text) * 0.6)
        piece = text[cut - chars:cut]
        piece = piece[piece.find("\n") + 1:].rstrip()
        prompts.append(tokenizer.encode(piece))
    return prompts


def tuning_prompts(tokenizer, n_profile: int, n_validate: int) -> tuple[list[list[int]], list[list[int]]]:
    """The tuner's prompts, from held-out files the benchmark's do not use: (n_profile prompts for the profiles, the
    next n_validate for costs and validation, or the first two of the profile's when n_validate is 0)."""
    every = held_out_prompts(tokenizer, n_profile + n_validate, avoid=BENCH_PROMPTS)
    return every[:n_profile], every[n_profile:] or every[:2]


def training_windows(tokenizer, n: int, length: int, seed: int = 0, per_file: int = 2) -> torch.Tensor:
    """n random token windows [n, length] from the training files (`per_file` from each of n / per_file
    files spread evenly over the sorted list; more per file when n needs more files than the split has);
    the same result for the same arguments."""
    files = build_corpus().train_files
    per_file = max(per_file, -(-n // len(files)))
    n_files = -(-n // per_file)
    step = max(1, len(files) // (4 * n_files))
    gen = torch.Generator().manual_seed(seed)
    windows: list[list[int]] = []
    for path in files[::step]:
        ids = [i for text in read_texts([path]) for i in tokenizer.encode(text)]
        if len(ids) <= length:
            continue
        for _ in range(per_file):
            start = int(torch.randint(0, len(ids) - length, (), generator=gen, device="cpu"))
            windows.append(ids[start:start + length])
        if len(windows) >= n:
            break
    if len(windows) < n:
        raise ValueError(f"found only {len(windows)} training windows of {length} tokens, wanted {n}")
    return torch.tensor(windows[:n], device="cpu")
