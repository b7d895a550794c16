"""Model configuration: the fields of a Hugging Face Qwen3 `config.json` that mini_llm uses."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Config:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    extra: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def kv_groups(self) -> int:
        """Query heads per key/value head (the GQA ratio)."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        """Read a HF Qwen3 config dict (transformers 4.x `rope_theta` or 5.x `rope_parameters`)."""
        model_type = d.get("model_type")
        if model_type != "qwen3":
            raise ValueError(f"mini_llm loads Qwen3 checkpoints only; config.json has model_type={model_type!r}")
        rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise NotImplementedError(f"RoPE type {rope_type!r} is not supported (only 'default')")
        if d.get("use_sliding_window"):
            raise NotImplementedError("sliding-window attention is not supported")
        rope_theta = rope.get("rope_theta", d.get("rope_theta", 1_000_000.0))
        known = {f for f in cls.__dataclass_fields__ if f not in ("rope_theta", "extra")}
        kwargs = {k: d[k] for k in known if k in d}
        return cls(rope_theta=float(rope_theta), extra={k: v for k, v in d.items() if k not in known}, **kwargs)

    @classmethod
    def from_json(cls, path: str | Path) -> "Config":
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"no config.json at {path}")
        return cls.from_dict(json.loads(path.read_text()))

    def to_hf_dict(self) -> dict:
        """A config.json that both transformers (4.x and 5.x) and mini_llm read."""
        d = {k: v for k, v in asdict(self).items() if k not in ("extra", "rope_theta")}
        d.update(
            model_type="qwen3",
            architectures=["Qwen3ForCausalLM"],
            hidden_act="silu",
            rope_theta=self.rope_theta,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            use_sliding_window=False,
            attention_dropout=0.0,
        )
        return d
