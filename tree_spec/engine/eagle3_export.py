"""Write the course's EAGLE-3 head as an EAGLE-3 draft checkpoint in the reference layout, which vLLM loads (method "eagle3").

    python -m tree_spec.engine.eagle3_export [--head models/heads/eagle3] [--target tiny-qwen3]
                                             [--out runs/eagle3-vllm]

The head already has the reference layout and names (`fc`, `midlayer.*`, see `tree_spec.drafters.heads`); the
export adds what the course takes from the target at run time: the final norm (`norm`) and the LM head
(`lm_head`, the full vocabulary, so no `d2t` map). The token embedding stays the target's: vLLM shares it when
the checkpoint has none. `config.json` is the target's with one layer and `eagle_aux_hidden_state_layer_ids`:
vLLM's id i is the input of target layer i, that is the output of layer i - 1, so the course's fused layers
(1, 4, 6 for 8 layers) are written as (2, 5, 7). The folder is derived from the head: the command rewrites it.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from mini_llm import Transformer, load_model
from mini_llm.load import MODELS_DIR, resolve_model_path

from ..drafters.head_io import load_head_module
from ..drafters.heads import Eagle3Head

DEFAULT_HEAD = MODELS_DIR / "heads" / "eagle3"
DEFAULT_OUT = MODELS_DIR.parent / "runs" / "eagle3-vllm"  # derived, not shipped (runs/ is gitignored)


def vllm_layer_ids(feature_layers: tuple[int, ...]) -> list[int]:
    """The course's fused layer outputs (0-based layer indices) -> vLLM's aux hidden-state ids (layer inputs)."""
    return [layer + 1 for layer in feature_layers]


def eagle3_tensors(head: Eagle3Head, target: Transformer) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors (fp32, contiguous): the head's own plus `norm.weight` [C] and `lm_head.weight` [V, C]."""
    tensors = dict(head.state_dict())
    tensors["norm.weight"] = target.norm.weight
    lm_head = target.embed_tokens if target.cfg.tie_word_embeddings else target.lm_head
    tensors["lm_head.weight"] = lm_head.weight
    return {name: t.detach().float().cpu().contiguous() for name, t in tensors.items()}


def export_eagle3(head_folder: str | Path, target_name: str | Path, out: str | Path) -> Path:
    """Write `model.safetensors` and `config.json` for vLLM into `out` -> out."""
    target = load_model(target_name)
    head = load_head_module(head_folder, target)
    if not isinstance(head, Eagle3Head):
        raise ValueError(f"{head_folder} holds a {head.kind} head; only an eagle3 head has vLLM's EAGLE-3 layout")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(eagle3_tensors(head, target), str(out / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((resolve_model_path(target_name) / "config.json").read_text())
    config.update(num_hidden_layers=1, tie_word_embeddings=False, torch_dtype="float32",
                  draft_vocab_size=target.cfg.vocab_size, target_hidden_size=target.cfg.hidden_size,
                  eagle_aux_hidden_state_layer_ids=vllm_layer_ids(head.feature_layers))
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--head", default=str(DEFAULT_HEAD), help="the trained eagle3 head folder")
    p.add_argument("--target", default="tiny-qwen3", help="its target (model folder or name under models/)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="the checkpoint folder to write")
    args = p.parse_args(argv)
    out = export_eagle3(args.head, args.target, args.out)
    print(f"wrote {out}: run it with --speculative-config '{{\"method\": \"eagle3\", \"model\": \"{out}\", "
          f"\"num_speculative_tokens\": 3}}'")
    return out


if __name__ == "__main__":
    main()
