"""Write a model card (README.md) for a trained folder from its train_log.json, with measured figures.

    python -m mini_llm.card models/tiny-qwen3 models/tiny-qwen3-draft

Each card gets: architecture, parameter count, corpus, tokens seen, training time and hardware,
held-out loss and bytes per token, the loss curve, greedy continuations of five fixed prompts, and the
commands that reproduce it. Decode ms/token of all the given models is measured in one run (interleaved).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from .generate import generate
from .load import load_tokenizer
from .model import Transformer

PROMPTS = [
    "def fibonacci(n):",
    "import os\nimport sys\n\n\ndef main(argv):",
    "class Stack:\n    def __init__(self):\n        self.",
    "for key, value in sorted(d.items()):",
    "try:\n    import json\nexcept ImportError:",
]

REPRODUCE = """```bash
# the draft first: it also trains the shared tokenizer (runs/draft/tokenizer)
python -m mini_llm.train --preset draft --out models/tiny-qwen3-draft --work runs/draft --steps 1500 --lr 3e-3 --eval-every 250
python -m mini_llm.train --preset target --out models/tiny-qwen3 --work runs/target --tokenizer runs/draft/tokenizer --steps 4000 --lr 3e-3 --eval-every 250
python -m mini_llm.card models/tiny-qwen3 models/tiny-qwen3-draft
```"""


def decode_ms_per_token(models: dict[str, Transformer], new_tokens: int = 64, repeats: int = 5) -> dict[str, float]:
    """Batch-1 greedy decode ms/token of each model: the best of `repeats` interleaved runs.

    Thread CPU time (the time this thread ran, not the time it waited for a core), and the minimum, not
    the mean, because interference from other processes only ever adds time.
    """
    prompt = torch.randint(0, 1000, (1, 32), generator=torch.Generator().manual_seed(0), device="cpu")
    times: dict[str, list[float]] = {name: [] for name in models}
    for name, m in models.items():
        generate(m, prompt, 8)
    for _ in range(repeats):
        for name, m in models.items():
            start = time.thread_time()
            generate(m, prompt, new_tokens)
            times[name].append(time.thread_time() - start)
    return {name: 1000 * min(t) / new_tokens for name, t in times.items()}


def continuations(path: Path, max_new_tokens: int = 48) -> list[tuple[str, str]]:
    tok = load_tokenizer(path)
    model = Transformer.from_pretrained(path)
    out = []
    for prompt in PROMPTS:
        ids = torch.tensor([tok.encode(prompt)], device="cpu")
        new = generate(model, ids, max_new_tokens, eos_token_id=model.cfg.eos_token_id)
        out.append((prompt, tok.decode(new[0].tolist())))
    return out


def render(path: Path, log: dict, ms: dict[str, float]) -> str:
    cfg, corpus = log["config"], log["corpus"]
    final = log["eval"][-1]
    tokens_seen = final["tokens"]
    role = "target" if log["preset"] == "target" else "draft"
    args = log["resumed"][-1]["args"] if log.get("resumed") else log["args"]
    resumes = "".join(
        f"; stopped and resumed at step {r['step']} with `--steps {r['args']['steps']}`" for r in log.get("resumed", [])
    )
    lines = [
        f"# {path.name}",
        "",
        f"A {log['params'] / 1e6:.2f} M-parameter Qwen3-architecture language model of Python source, the course's "
        f"embedded **{role}**. Trained from scratch on this machine with `mini_llm`; loads in `mini_llm` "
        "(`load_model(\"" + path.name + "\")`) and in `transformers` (`AutoModelForCausalLM`).",
        "",
        "## Architecture",
        f"- hidden {cfg['hidden_size']}, {cfg['num_hidden_layers']} layers, {cfg['num_attention_heads']} query heads, "
        f"{cfg['num_key_value_heads']} KV heads (GQA {cfg['num_attention_heads'] // cfg['num_key_value_heads']}:1), "
        f"head_dim {cfg['head_dim']}, SwiGLU intermediate {cfg['intermediate_size']}, QK-norm, RoPE θ {cfg['rope_theta']:g}, "
        f"tied embeddings",
        f"- vocabulary {cfg['vocab_size']} (byte-level BPE, `<|endoftext|>` = {cfg['eos_token_id']} between files)",
        f"- {log['params']:,} parameters; weights stored in bf16 (`mini_llm` upcasts to fp32 on request)",
        "",
        "## Data",
        f"- corpus: the `.py` files of the Python {corpus['python']} standard library (test folders "
        f"{'included' if corpus['include_tests'] else 'excluded'}; site-packages excluded), split by file: "
        f"{corpus['train_files']} training files ({log['train_tokens_in_corpus']:,} tokens), "
        f"{corpus['held_out_files']} held-out files ({log['held_out_tokens']:,} tokens); held out iff "
        f"`{corpus['held_out_rule']}`",
        f"- held-out bytes per token: {log['held_out_bytes_per_token']:.2f}",
        "- prompts that end in whitespace are out of distribution: the BPE merges a newline with the following "
        "indentation, so a prompt ending in `\"\\n\"` or `\"    \"` ends on a rare token. End prompts on a "
        "non-whitespace character.",
        "",
        "## Training",
        f"- AdamW (β 0.9/0.95, weight decay {args['weight_decay']}), peak lr {args['lr']:g}, "
        f"{args['warmup']} warmup steps then cosine to 10 %, batch {args['batch']} × "
        f"{args['seq']} tokens, bf16 autocast, {args['steps']} steps{resumes}",
        f"- tokens seen: {tokens_seen:,} ({tokens_seen / log['train_tokens_in_corpus']:.1f} epochs)",
        f"- time: {log['seconds'] / 60:.0f} minutes on {log['hardware']} (torch {log['torch']}; the machine was shared "
        "with other work, so the time is an upper bound)",
        "",
        "## Results",
        f"- **held-out loss {final['loss']:.3f} nats/token** ({final['loss'] / log['held_out_bytes_per_token']:.3f} nats/byte), "
        "over every held-out window of 256 tokens",
        "- decode cost, batch-1 greedy, fp32, measured in one run (`python -m mini_llm.card ...`): "
        + ", ".join(f"{name} {v:.2f} ms/token" for name, v in ms.items()),
        "",
        "![loss curve](loss_curve.png)",
        "",
        "Loss curve data: `train_log.json` (`train`: training loss every 20 steps, `eval`: held-out loss).",
        "",
        "## Greedy continuations (48 new tokens)",
        "",
    ]
    for prompt, text in continuations(path):
        lines += ["```python", prompt + text, "```", ""]
    lines += ["## Reproduce", "", REPRODUCE, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folders", nargs="+", type=Path)
    args = p.parse_args(argv)
    models = {f.name: Transformer.from_pretrained(f) for f in args.folders}
    ms = decode_ms_per_token(models)
    for name, v in ms.items():
        print(f"{name}: {v:.2f} ms/token")
    for folder in args.folders:
        log = json.loads((folder / "train_log.json").read_text())
        (folder / "README.md").write_text(render(folder, log, ms))
        print(f"wrote {folder / 'README.md'}")


if __name__ == "__main__":
    main()
