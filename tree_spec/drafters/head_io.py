"""Save and load draft heads: `head.safetensors` + `config.json` in a folder; `load_head` rebuilds the drafter."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from mini_llm import Transformer
from mini_llm.linear import gemv_layout

from .base import Drafter
from .features import HeadDrafter, MedusaDrafter
from .heads import make_head


def save_head(head: torch.nn.Module, folder: str | Path, extra: dict | None = None) -> None:
    """Write the head's weights (fp32) and a config.json that `load_head` reads (plus `extra` fields)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().float().cpu().contiguous() for k, v in head.state_dict().items()}
    save_file(tensors, str(folder / "head.safetensors"), metadata={"format": "pt", "kind": head.kind})
    config = {
        "kind": head.kind,
        "num_heads": getattr(head, "num_heads", None),
        "feature_layers": list(getattr(head, "feature_layers", ())),
        **(extra or {}),
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def load_head_module(folder: str | Path, target: Transformer) -> torch.nn.Module:
    """The trained head nn.Module in `folder`, shape-checked against `target`'s config."""
    folder = Path(folder)
    if not (folder / "config.json").is_file() or not (folder / "head.safetensors").is_file():
        raise FileNotFoundError(f"no trained head in {folder} (need config.json and head.safetensors)")
    config = json.loads((folder / "config.json").read_text())
    with torch.device("cpu"):  # built on the host whatever torch's default device is, then moved
        head = make_head(config["kind"], target.cfg, config.get("num_heads") or 4, config.get("feature_layers") or None)
    state = load_file(str(folder / "head.safetensors"))
    expected = head.state_dict()
    bad = sorted(k for k in expected if k not in state or state[k].shape != expected[k].shape)
    bad += sorted(k for k in state if k not in expected)
    if bad:
        raise ValueError(f"head in {folder} does not fit the target (hidden {target.cfg.hidden_size}): "
                         f"missing, unexpected or mis-shaped tensors {bad}")
    head.load_state_dict(state)
    head = head.to(device=target.device, dtype=target.dtype).eval()
    if target.device.type == "cpu":  # as the target's weights: faster for the few rows a draft call feeds
        head.load_state_dict({k: gemv_layout(p.detach()) for k, p in head.named_parameters()}, assign=True)
    return head


def drafter_for(target: Transformer, head: torch.nn.Module, draft_vocab: torch.Tensor | None = None) -> Drafter:
    """The drafter that runs `head` on `target`'s features: MedusaDrafter or HeadDrafter.

    draft_vocab: optional LongTensor [N] of the token ids it may propose (a reduced LM head; None = all).
    """
    kind = MedusaDrafter if head.kind == "medusa" else HeadDrafter
    return kind(target, head, draft_vocab)


def load_head(folder: str | Path, target: Transformer, draft_vocab: torch.Tensor | None = None) -> Drafter:
    """`load_head("models/heads/eagle", target)` -> the ready drafter (MedusaDrafter or HeadDrafter);
    `draft_vocab` as in `drafter_for`."""
    return drafter_for(target, load_head_module(folder, target), draft_vocab)
