"""Random tiny targets and drafts for the tree_spec tests (peaked logits, drafts that are sometimes right)."""
import torch

from mini_llm import Config, Transformer

TINY = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=256, rope_theta=10_000.0)


def random_model(seed: int = 0, std: float = 0.5, **overrides) -> Transformer:
    """A random Transformer whose matrices have std `std`, so its logits spread over several nats."""
    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = Transformer(Config(**{**TINY, **overrides})).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, std)
    return model


def perturbed_copy(model: Transformer, noise: float = 0.05, seed: int = 1) -> Transformer:
    """A draft: `model` with Gaussian noise on its matrices (acceptance around 0.2-0.6 per token)."""
    with torch.device("cpu"):
        draft = Transformer(model.cfg).eval()
    draft.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            if p.ndim == 2:
                p.add_(torch.randn(p.shape, generator=g, device="cpu") * noise)
    return draft


def prompts(vocab_size: int, n: int, length: int = 8, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (n, length), generator=g, device="cpu").tolist()


def checkpoint_with_tokenizer(folder, seed: int = 0, **overrides):
    """A random target saved in HF format next to the embedded tokenizer (vocabulary 4096), so the CLIs
    that read `models/<name>/` run on it; returns the folder."""
    import shutil
    from pathlib import Path

    tokenizer_dir = Path(__file__).resolve().parent.parent / "models" / "tiny-qwen3-draft"
    model = random_model(seed, **{"vocab_size": 4096, "max_position_embeddings": 1024, **overrides})
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, Path(folder) / name)
    return folder
