"""A Qwen3 decoder in one file, with one forward path for prefill, decode, chain and tree verification.

State-dict names equal Hugging Face Qwen3's after stripping the `model.` prefix, so loading a checkpoint
is a shape-checked copy with no renaming. Projections that read the same input are stored fused (q/k/v,
gate/up: one matmul each, see `FusedLinear`); `state_dict` and `load_state_dict` use the checkpoint's
separate names all the same.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from .cache import KVCache, FixedShapeCache, attention_mask
from .config import Config
from .linear import Linear, PackedCopy, gemv_layout, linear


class RMSNorm(nn.Module):
    """y = w * x / sqrt(mean(x^2) + eps), statistics in fp32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * self.normalize(x)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """x / sqrt(mean(x^2) + eps) over the last axis, computed in fp32, returned in x's dtype (no weight)."""
        x32 = x.float()
        if x.device.type != "cpu":  # F.rms_norm: one fused kernel on CUDA, a slower composite on the CPU (~5 % a step)
            return F.rms_norm(x32, x.shape[-1:], eps=self.eps).to(x.dtype)
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """positions [T] or [B, T] -> cos, sin [B or 1, T, 1, head_dim] in fp32: angle i (and i + head_dim/2) of
    position p is p * theta^(-2i/head_dim), the tables transformers' Qwen3 rotary embedding builds."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    if angles.ndim == 2:
        angles = angles[None]
    return angles.cos()[:, :, None, :], angles.sin()[:, :, None, :]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [B, T, H, D] by its positions (half-split layout, as in Qwen3), in fp32; cos, sin [..., T, 1, D].

    Pair (x_i, x_{i+D/2}) turns by angle_i: (x_i cos - x_{i+D/2} sin, x_{i+D/2} cos + x_i sin), written as
    x * cos + rotate_half(x) * sin with rotate_half(x) = (-x_{D/2:}, x_{:D/2}).
    """
    x32 = x.float()
    x1, x2 = x32.chunk(2, dim=-1)
    return (x32 * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)


def sdpa_mask(mask: torch.Tensor, groups: int, dtype: torch.dtype) -> torch.Tensor:
    """bool mask [T, S] or per row [B, T, S] (True = may attend) -> the additive mask (0 or -inf) that
    attention reads with its G = `groups` query heads per KV head folded into the query axis:
    [G*T, S] or [B, 1, G*T, S]."""
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    additive = additive.repeat(*([1] * (mask.ndim - 2)), groups, 1)
    return additive[:, None] if additive.ndim == 3 else additive


class Projection(NamedTuple):
    """One checkpoint projection inside a FusedLinear: its weight [out, in] and bias [out] (or None), views."""

    weight: torch.Tensor
    bias: torch.Tensor | None


class FusedLinear(Linear):
    """Linear layers that read the same input, stacked along the output: one matmul instead of several.

    A decode step of a small model spends more time launching operators than multiplying, so one call
    instead of three (q, k, v) or two (gate, up) is time saved; the bytes of weights read stay the same.
    parts: each layer's checkpoint name and output size, in order, e.g. {"gate_proj": 768, "up_proj": 768}.
    Each output is x times one weight row, so the result is the parts' outputs side by side, equal to
    separate layers' up to the matmul's summation order. The parent module stores one weight and reads and
    writes the parts under their own names (`checkpoint_names`).
    """

    def __init__(self, in_features: int, parts: dict[str, int], bias: bool) -> None:
        super().__init__(in_features, sum(parts.values()), bias=bias)
        self.parts = dict(parts)

    def split(self, tensor: torch.Tensor, dim: int = 0) -> dict[str, torch.Tensor]:
        """A tensor over the fused outputs along `dim` -> {part name: its slice} (views)."""
        return dict(zip(self.parts, tensor.split(list(self.parts.values()), dim)))

    def part(self, name: str) -> Projection:
        """Part `name`'s weight and bias, as views of the fused ones (writing them writes the fused layer)."""
        bias = None if self.bias is None else self.split(self.bias)[name]
        return Projection(self.split(self.weight)[name], bias)


def checkpoint_names(module: nn.Module) -> None:
    """Make `module`'s state_dict() and load_state_dict() use the checkpoint names of its FusedLinear children's
    parts (`q_proj.weight`, ... instead of `qkv_proj.weight`): saving splits each fused tensor into views,
    loading concatenates the parts (a checkpoint, a saved head, an older state dict load unchanged)."""

    def split_fused(module: nn.Module, state: dict, prefix: str, local_metadata: dict) -> None:
        children = dict(module.named_children())
        # This module's entries were the last ones written: re-insert them in order, each fused tensor
        # replaced by its parts, so the state dict lists q, k, v, o, ... as the checkpoint does.
        for key in [k for k in state if k.startswith(prefix)]:
            value = state.pop(key)
            name, _, suffix = key.removeprefix(prefix).partition(".")
            if isinstance(children.get(name), FusedLinear):
                for part, tensor in children[name].split(value).items():
                    state[f"{prefix}{part}.{suffix}"] = tensor
            else:
                state[key] = value

    def join_parts(module: nn.Module, state: dict, prefix: str, *args) -> None:
        for name, child in module.named_children():
            if isinstance(child, FusedLinear):
                for suffix in ("weight", "bias"):
                    keys = [f"{prefix}{part}.{suffix}" for part in child.parts]
                    if all(key in state for key in keys):
                        state[f"{prefix}{name}.{suffix}"] = torch.cat([state.pop(key) for key in keys])

    module.register_state_dict_post_hook(split_fused)
    module.register_load_state_dict_pre_hook(join_parts)


class Attention(nn.Module):
    """Grouped-query attention with per-head RMSNorm on queries and keys (Qwen3's QK-norm)."""

    def __init__(self, cfg: Config, layer_idx: int, input_size: int | None = None) -> None:
        """input_size: the width of x (default the hidden size; EAGLE-3's draft layer reads 2 x hidden)."""
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        q_size, kv_size = self.n_heads * self.head_dim, self.n_kv * self.head_dim
        # q_proj, k_proj and v_proj read the same x: one [q + 2 kv, C] matmul instead of three.
        parts = {"q_proj": q_size, "k_proj": kv_size, "v_proj": kv_size}
        self.qkv_proj = FusedLinear(input_size or cfg.hidden_size, parts, bias=cfg.attention_bias)
        self.o_proj = Linear(q_size, cfg.hidden_size, bias=cfg.attention_bias)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        checkpoint_names(self)

    # The checkpoint's projections, read as views of the fused one: `attn.q_proj.weight` [n_heads * D, C].
    q_proj = property(lambda self: self.qkv_proj.part("q_proj"))
    k_proj = property(lambda self: self.qkv_proj.part("k_proj"))
    v_proj = property(lambda self: self.qkv_proj.part("v_proj"))

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | FixedShapeCache | None,
        attn_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """x [B, T, C]; cos, sin [..., T, 1, D] (`rope_cos_sin`); attn_mask [T, S] or per row [B, T, S] bool
        (S = cache slots read), the additive mask `sdpa_mask` made of it (the model makes it once per
        forward, not once per layer), or None for full attention -> [B, T, C]."""
        B, T, _ = x.shape
        qkv = self.qkv_proj(x).view(B, T, self.n_heads + 2 * self.n_kv, self.head_dim)
        qk, v = qkv.split((self.n_heads + self.n_kv, self.n_kv), dim=2)
        # QK-norm and RoPE treat every query and key head alike, only the norm weights differ (the eps is
        # shared): normalize and rotate all n_heads + n_kv heads in one go, the values of q and k apart.
        norm_weight = torch.cat((self.q_norm.weight.expand(self.n_heads, -1), self.k_norm.weight.expand(self.n_kv, -1)))
        qk = apply_rope(norm_weight * self.q_norm.normalize(qk), cos, sin)
        q, k = qk.split((self.n_heads, self.n_kv), dim=2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)
        if cache is not None:
            k, v = cache.write(self.layer_idx, k, v)
        # Fold the G query heads that share one KV head into the query axis: [B, n_kv, G*T, D].
        # Keys and values are read once per KV head, never copied G times. (SDPA's enable_gqa=True would skip the
        # two reshapes, but on CUDA only its flash and math kernels take it: a masked pass would copy K/V G times.)
        groups = self.n_heads // self.n_kv
        q = q.view(B, T, self.n_kv, groups, self.head_dim).permute(0, 2, 3, 1, 4).reshape(B, self.n_kv, groups * T, self.head_dim)
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = sdpa_mask(attn_mask, groups, q.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        out = out.view(B, self.n_kv, groups, T, self.head_dim).permute(0, 3, 1, 2, 4).reshape(B, T, -1)
        return self.o_proj(out)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up as one matmul."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        parts = {"gate_proj": cfg.intermediate_size, "up_proj": cfg.intermediate_size}
        self.gate_up_proj = FusedLinear(cfg.hidden_size, parts, bias=False)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        checkpoint_names(self)

    # The checkpoint's projections, read as views of the fused one: `mlp.gate_proj.weight` [I, C].
    gate_proj = property(lambda self: self.gate_up_proj.part("gate_proj"))
    up_proj = property(lambda self: self.gate_up_proj.part("up_proj"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg, layer_idx)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache, attn_mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, attn_mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    """Qwen3 causal LM. `model(ids, cache=, positions=, mask=, return_hidden=)` is its only forward path."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self._lm_head_packed = PackedCopy()  # the LM head's multi-row copy (mini_llm.linear)
        self._rope: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}  # see rope_tables

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch_size: int = 1, max_len: int = 2048) -> KVCache:
        """A KV cache on this model's device and dtype."""
        return KVCache(self.cfg, batch_size, max_len, dtype=self.dtype, device=self.device)

    def rope_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [max_position_embeddings, head_dim] (fp32, on the model's device) of every position.

        Computed on first use per device and kept outside the parameters (fp32 whatever the model's dtype,
        not in the state dict): a forward looks up its positions' rows instead of computing cos and sin.
        """
        device = self.device
        if device not in self._rope:
            positions = torch.arange(self.cfg.max_position_embeddings, device=device)
            cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta)
            self._rope[device] = cos[0, :, 0], sin[0, :, 0]
        return self._rope[device]

    def logits_from_hidden(self, hidden: torch.Tensor) -> torch.Tensor:
        """Final norm + LM head: hidden [..., C] (the final-norm input) -> logits [..., V]."""
        h = self.norm(hidden)
        weight = self.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight
        return linear(h, weight, None, self._lm_head_packed)

    def forward(
        self,
        ids: torch.Tensor,
        cache: KVCache | FixedShapeCache | None = None,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        return_hidden: bool = False,
        hidden_layers: Sequence[int] | None = None,
    ):
        """Run T new tokens after the cached prefix (each row after its own cached length).

        ids [B, T]; positions [T] or [B, T], each below max_position_embeddings (default: row b's cache
        length + arange(T)); mask [T, T] or per row [B, T, T] bool among the new tokens (True = may attend;
        each row's cached prefix is always visible; default causal). Row b's new K/V go to its cache slots
        [lengths[b], lengths[b] + T) and every row's length advances by T.
        Returns logits [B, T, V]; with return_hidden, (logits, hidden [B, T, C]) where hidden is the
        final-norm input; with hidden_layers too, (logits, hidden, [output of each listed layer, in the listed
        order, repeats included]).
        """
        if ids.ndim != 2:
            raise ValueError(f"ids must be [batch, seq], got shape {tuple(ids.shape)}")
        B, T = ids.shape
        if hidden_layers is not None and not all(0 <= i < len(self.layers) for i in hidden_layers):
            raise ValueError(f"hidden_layers {list(hidden_layers)} must index this model's {len(self.layers)} layers")
        if cache is not None:
            if cache.batch_size != B:
                raise ValueError(f"ids batch {B} != cache batch_size {cache.batch_size}")
            cache.reserve(T)
        if positions is None:
            positions = cache.positions(T, ids.device) if cache is not None else torch.arange(T, device=ids.device)
        elif positions.shape[-1] != T or positions.ndim not in (1, 2):
            raise ValueError(f"positions must be [{T}] or [B, {T}], got {tuple(positions.shape)}")
        if cache is not None:
            attn_mask = cache.attention_mask(T, mask, ids.device)
        else:
            attn_mask = attention_mask(T, [0] * B, mask, ids.device)
        if attn_mask is not None:
            attn_mask = sdpa_mask(attn_mask, self.cfg.num_attention_heads // self.cfg.num_key_value_heads, self.dtype)
        cos_table, sin_table = self.rope_tables()
        cos, sin = cos_table[positions].unsqueeze(-2), sin_table[positions].unsqueeze(-2)  # [(B,) T, 1, D]

        x = self.embed_tokens(ids)
        wanted = set(hidden_layers or ())
        by_layer = {}
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache, attn_mask)
            if i in wanted:
                by_layer[i] = x
        if cache is not None:
            cache.advance(T)
        logits = self.logits_from_hidden(x)
        if hidden_layers is not None:
            return logits, x, [by_layer[i] for i in hidden_layers]
        return (logits, x) if return_hidden else logits

    # ---------------------------------------------------------------- Hugging Face format
    def hf_state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters under their Hugging Face Qwen3 names (`model.` prefix, `lm_head.weight` if untied)."""
        return {
            (k if k.startswith("lm_head.") else f"model.{k}"): v.detach().contiguous()
            for k, v in self.state_dict().items()
        }

    def save_pretrained(self, path: str | Path, dtype: torch.dtype | None = None) -> None:
        """Write `config.json` + `model.safetensors` (optionally cast to `dtype`, e.g. torch.bfloat16)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        tensors = {k: (v.to(dtype) if dtype else v).cpu() for k, v in self.hf_state_dict().items()}
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        cfg = self.cfg.to_hf_dict()
        cfg["torch_dtype"] = str(dtype or self.dtype).removeprefix("torch.")
        (path / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")

    @classmethod
    def from_pretrained(
        cls, path: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
    ) -> "Transformer":
        """Load a HF-format Qwen3 folder (config.json + *.safetensors); every bad tensor is named."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"model folder not found: {path}")
        cfg = Config.from_json(path / "config.json")
        tensors = _read_safetensors(path)
        # Large models are built on the meta device (no random init of weights about to be replaced);
        # small ones on the CPU, which is faster than torch's one-off ~1.5 s import of its meta kernels.
        n_params = sum(t.numel() for t in tensors.values())
        with torch.device("meta" if n_params > 50_000_000 or str(device) == "meta" else "cpu"):
            model = cls(cfg)
        expected = {k: v.shape for k, v in model.state_dict().items()}  # checkpoint names (fused ones split)
        found = {k.removeprefix("model."): v for k, v in tensors.items()}
        if cfg.tie_word_embeddings:
            found.pop("lm_head.weight", None)  # some tied checkpoints store the shared matrix twice
        missing = sorted(set(expected) - set(found))
        unexpected = sorted(set(found) - set(expected))
        misshaped = sorted(
            f"{k}: checkpoint {tuple(found[k].shape)} vs model {tuple(s)}"
            for k, s in expected.items() if k in found and found[k].shape != s
        )
        if missing or unexpected or misshaped:
            lines = [f"checkpoint {path} does not match its config.json:"]
            lines += [f"  missing: {k}" for k in missing]
            lines += [f"  unexpected: {k}" for k in unexpected]
            lines += [f"  mis-shaped: {k}" for k in misshaped]
            raise ValueError("\n".join(lines))
        model.load_state_dict({k: found[k].to(device=device, dtype=dtype) for k in expected}, assign=True)
        if torch.device(device).type == "cpu":  # after fusing (torch.cat returns row-major matrices)
            model.load_state_dict({k: gemv_layout(p.detach()) for k, p in model.named_parameters()}, assign=True)
        return model.eval()


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors file in {path} (mini_llm loads safetensors only)")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            tensors.update(load_file(str(f)))
        except (SafetensorError, OSError, ValueError) as e:
            raise ValueError(f"cannot read {f}: {e}") from e
    return tensors
