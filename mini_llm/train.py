"""Train a Qwen3-architecture model on the Python standard library with mini_llm's own forward path.

    python -m mini_llm.train --preset draft --out runs/my-draft --steps 1500 --lr 3e-3
    python -m mini_llm.train --preset target --out runs/my-target --tokenizer runs/draft/tokenizer --steps 4000 --lr 3e-3

(the shipped models' own commands are in their cards, models/*/README.md). A folder that already holds files is
never overwritten without `--force` (or `--resume`, which continues the run that wrote it).

Writes Hugging Face format (config.json, model.safetensors in bf16, tokenizer files), the loss log
(train_log.json) and its plot (loss_curve.png) at every evaluation, and a resumable checkpoint
(`--work`, default `runs/<preset>`, git-ignored) so that `--resume` continues a stopped run.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .config import Config
from .corpus import EOT, build_corpus, encode_files, read_texts, train_tokenizer
from .model import Transformer

PRESETS = {
    "target": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64),
    "draft": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=64),
    "tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=16),
}


def preset_config(name: str, vocab_size: int, eot_id: int, max_len: int = 4096) -> Config:
    return Config(vocab_size=vocab_size, rms_norm_eps=1e-6, rope_theta=10_000.0, max_position_embeddings=max_len,
                  tie_word_embeddings=True, eos_token_id=eot_id, bos_token_id=eot_id, **PRESETS[name])


def init_weights(model: Transformer, std: float = 0.02) -> None:
    """Normal(0, std) for matrices and embeddings; residual output projections scaled by 1/sqrt(2 * layers)."""
    out_std = std / math.sqrt(2 * model.cfg.num_hidden_layers)
    for name, p in model.named_parameters():
        if p.ndim == 2:
            torch.nn.init.normal_(p, 0.0, out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else std)


def lr_at(step: int, total: int, peak: float, warmup: int, final_frac: float = 0.1) -> float:
    """Linear warmup to `peak`, then cosine decay to `final_frac * peak` at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * progress)))


def eval_windows(stream: np.ndarray, seq_len: int, max_windows: int | None) -> torch.Tensor:
    """Non-overlapping [n, seq_len + 1] windows spread evenly over `stream` (all of them if max_windows is None)."""
    n_all = (len(stream) - 1) // seq_len
    picks = np.arange(n_all) if max_windows is None or max_windows >= n_all else np.linspace(0, n_all - 1, max_windows).astype(int)
    return torch.from_numpy(np.stack([stream[i * seq_len: i * seq_len + seq_len + 1] for i in picks]).astype(np.int64))


@torch.no_grad()
def evaluate(model: Transformer, windows: torch.Tensor, batch: int, autocast: bool) -> float:
    """Mean next-token cross-entropy (nats/token) over windows [n, seq_len + 1]."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        w = windows[i:i + batch]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(w[:, :-1])
        total += F.cross_entropy(logits.float().flatten(0, 1), w[:, 1:].flatten(), reduction="sum").item()
        count += w[:, 1:].numel()
    model.train()
    return total / count


def prepare_data(args, work: Path):
    """Corpus, tokenizer (trained or loaded) and the train / held-out token streams (cached in `work`)."""
    from tokenizers import Tokenizer

    corpus = build_corpus(include_tests=not args.no_tests)
    if args.max_files:
        corpus.train_files, corpus.held_out_files = corpus.train_files[: args.max_files], corpus.held_out_files[: args.max_files]
    tok_dir = Path(args.tokenizer) if args.tokenizer else work / "tokenizer"
    if not (tok_dir / "tokenizer.json").exists():
        if args.tokenizer:
            raise FileNotFoundError(f"no tokenizer.json in {tok_dir}")
        train_tokenizer(read_texts(corpus.train_files), tok_dir, args.vocab)
    tok = Tokenizer.from_file(str(tok_dir / "tokenizer.json"))
    streams = {}
    for split, files in (("train", corpus.train_files), ("held_out", corpus.held_out_files)):
        cached = work / f"{split}.npy"
        if not cached.exists():
            np.save(cached, encode_files(tok, read_texts(files)))
        streams[split] = np.load(cached)
    held_out_bytes = sum(len(t.encode()) for t in read_texts(corpus.held_out_files))
    return corpus, tok, tok_dir, streams, held_out_bytes


def save_checkpoint(path: Path, model, opt, step: int, log: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "log": log}, tmp)
    os.replace(tmp, path)


def export(model: Transformer, out: Path, tok_dir: Path, log: dict) -> None:
    """HF folder: bf16 weights, config, tokenizer files, the loss log and its plot."""
    model.save_pretrained(out, dtype=torch.bfloat16)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (tok_dir / name).resolve() != (out / name).resolve():
            (out / name).write_bytes((tok_dir / name).read_bytes())
    (out / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")
    plot_loss(log, out / "loss_curve.png")


def plot_loss(log: dict, path: Path) -> None:
    from matplotlib.figure import Figure  # no pyplot: a notebook's backend is left alone

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    tr = log["train"]
    if tr:
        ax.plot([r["tokens"] / 1e6 for r in tr], [r["loss"] for r in tr], lw=0.8, alpha=0.6, label="train")
    ev = log["eval"]
    if ev:
        ax.plot([r["tokens"] / 1e6 for r in ev], [r["loss"] for r in ev], "o-", ms=3, label="held-out")
    ax.set_xlabel("tokens seen (millions)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(f"{log['preset']}: {log['params'] / 1e6:.1f} M parameters")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def refuse_to_overwrite(parser: argparse.ArgumentParser, out: Path, force: bool) -> None:
    """Stop with a usage error when `out` already holds files and `force` is False: a shipped model or head is
    never replaced by accident."""
    if out.is_dir() and any(out.iterdir()) and not force:
        parser.error(f"{out} already holds files (a shipped model's folder?): pass --force to overwrite them, "
                     "or choose another --out")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(PRESETS), required=True)
    p.add_argument("--out", required=True, help="output folder (Hugging Face format)")
    p.add_argument("--work", help="checkpoint / data cache folder (default: runs/<preset>)")
    p.add_argument("--tokenizer", help="folder with tokenizer.json to reuse (else one is trained)")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=500)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--no-tests", action="store_true", help="leave the stdlib's test folders out of the corpus")
    p.add_argument("--max-files", type=int, default=0, help="use only the first N train and held-out files (for quick tests)")
    p.add_argument("--no-autocast", action="store_true", help="train in fp32 instead of bf16 autocast")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--force", action="store_true", help="overwrite an --out folder that already holds files")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    out = Path(args.out)
    refuse_to_overwrite(p, out, args.force or args.resume)
    work = Path(args.work) if args.work else Path("runs") / args.preset
    work.mkdir(parents=True, exist_ok=True)
    corpus, tok, tok_dir, streams, held_out_bytes = prepare_data(args, work)
    train_stream = torch.from_numpy(streams["train"].astype(np.int64))
    windows = eval_windows(streams["held_out"], args.seq, args.eval_windows)

    torch.manual_seed(args.seed)
    cfg = preset_config(args.preset, tok.get_vocab_size(), tok.token_to_id(EOT))
    model = Transformer(cfg)
    init_weights(model)
    decay = [p for p in model.parameters() if p.ndim == 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    autocast = not args.no_autocast
    log = {
        "preset": args.preset, "params": model.num_parameters(), "config": cfg.to_hf_dict(),
        "corpus": corpus.describe(), "train_tokens_in_corpus": int(len(train_stream)),
        "held_out_tokens": int(len(streams["held_out"])),
        "held_out_bytes_per_token": held_out_bytes / len(streams["held_out"]),
        "args": vars(args), "hardware": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads",
        "torch": torch.__version__, "train": [], "eval": [], "seconds": 0.0,
    }
    step = 0
    ckpt = work / "ckpt.pt"
    if args.resume and ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, log = state["step"], state["log"]
        log.setdefault("resumed", []).append({"step": step, "args": vars(args)})
        print(f"resumed from {ckpt} at step {step}")

    gen = torch.Generator().manual_seed(args.seed + step)
    tokens_per_step = args.batch * args.seq
    model.train()
    t_start = time.perf_counter() - log["seconds"]
    bar = tqdm(range(step, args.steps), initial=step, total=args.steps, desc=f"train {args.preset}", unit="step")
    for step in bar:
        lr = lr_at(step, args.steps, args.lr, args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(train_stream) - args.seq - 1, (args.batch,), generator=gen, device="cpu")
        batch = torch.stack([train_stream[s:s + args.seq + 1] for s in starts.tolist()])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens = (step + 1) * tokens_per_step
        if step % 20 == 0:
            log["train"].append({"step": step + 1, "tokens": tokens, "loss": round(loss.item(), 4), "lr": lr})
            bar.set_postfix(loss=f"{loss.item():.3f}")
        last = step + 1 == args.steps
        if (step + 1) % args.eval_every == 0 or last:
            held = evaluate(model, windows if not last else eval_windows(streams["held_out"], args.seq, None),
                            args.batch, autocast)
            log["seconds"] = time.perf_counter() - t_start
            log["eval"].append({"step": step + 1, "tokens": tokens, "loss": round(held, 4),
                                "minutes": round(log["seconds"] / 60, 1), "full": last})
            bar.write(f"step {step + 1}: held-out loss {held:.4f} ({'all' if last else args.eval_windows} windows)")
            save_checkpoint(ckpt, model, opt, step + 1, log)
            export(model, out, tok_dir, log)
    bar.close()
    return log


if __name__ == "__main__":
    main()
