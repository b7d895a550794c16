"""Trainable draft heads that read the target's hidden states (the nn.Modules only; drafting is elsewhere).

All heads produce vectors in the target's last-hidden space and share the target's final norm + LM
head (`target.logits_from_hidden`) and its token embedding; neither is stored with the head.

- `MedusaHeads` (Cai et al. 2024): K independent residual blocks h + SiLU(W_k h + b_k) on the last
  hidden state of the last committed token; head k predicts the token k steps after the root.
- `EagleHead` (EAGLE-1, Li et al. 2024): fc([feature ⊕ embedding of the next token]) -> one decoder
  layer -> the next feature; run autoregressively on its own predicted features.
- `Eagle3Head` (EAGLE-3, Li et al. 2025, in the layout of its reference code (SafeAILab/EAGLE), which vLLM loads):
  the feature is first fused from low/mid/high decoder layer outputs (fc over their concatenation); its
  one layer's attention reads [RMSNorm(embedding) ⊕ RMSNorm(feature)] (2C wide) and the feature is the
  residual; trained with training-time test (no feature loss).
- `MTPHead` (DeepSeek-V3 MTP module): proj([RMSNorm(hidden) ⊕ RMSNorm(embedding)]) -> one block.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import Config, KVCache
from mini_llm.model import MLP, Attention, DecoderLayer, RMSNorm, rope_cos_sin

HEAD_KINDS = ("medusa", "eagle", "eagle3", "mtp")


def one_layer_config(cfg: Config) -> Config:
    """The target's config with a single decoder layer: the draft layer's shapes and its KV cache's."""
    return dataclasses.replace(cfg, num_hidden_layers=1, extra=dict(cfg.extra))


def fusion_layers(num_hidden_layers: int) -> tuple[int, int, int]:
    """Low / mid / high decoder layers that EAGLE-3 fuses (the high one is the second to last)."""
    n = num_hidden_layers
    return tuple(sorted((min(1, n - 1), n // 2, max(n - 2, 0))))


class MedusaHeads(nn.Module):
    """K residual blocks on the last hidden state: hidden [..., C] -> [..., K, C] (one vector per offset).

    Weights start at zero, so every head starts as the target's own next-token head (Medusa's init).
    """

    kind = "medusa"

    def __init__(self, hidden_size: int, num_heads: int = 4) -> None:
        super().__init__()
        self.num_heads, self.hidden_size = num_heads, hidden_size
        self.blocks = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_heads))
        for block in self.blocks:
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.stack([hidden + F.silu(block(hidden)) for block in self.blocks], dim=-2)


class RecurrentHead(nn.Module):
    """One decoder layer that maps (feature of position t-1, embedding of token t) to the feature of t.

    Subclasses define `encode` (target features -> the head's feature space) and `block` (the layer on
    feature and embedding). cfg: the target's config (the layer copies its shapes).
    """

    kind = "recurrent"

    def __init__(self, cfg: Config, feature_layers: Sequence[int] = ()) -> None:
        super().__init__()
        self.cfg = one_layer_config(cfg)
        self.feature_layers = tuple(feature_layers)

    @property
    def hidden_size(self) -> int:
        """The width of the features it reads and writes (its target's hidden size)."""
        return self.cfg.hidden_size

    def new_cache(self, batch_size: int, max_len: int, device: torch.device | str = "cpu") -> KVCache:
        """The head's own KV cache (one layer)."""
        return KVCache(self.cfg, batch_size, max_len, dtype=next(self.parameters()).dtype, device=device)

    def encode(self, hidden: torch.Tensor, layers: Sequence[torch.Tensor]) -> torch.Tensor:
        """Target features [..., C] (final-norm input, chosen layer outputs) -> head features [..., C]."""
        return hidden

    def block(self, feature: torch.Tensor, embedding: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              cache: KVCache | None, mask: torch.Tensor) -> torch.Tensor:
        """feature, embedding [B, T, C] -> the layer's output [B, T, C] (RoPE tables, cache, mask as `forward`)."""
        raise NotImplementedError

    def forward(
        self,
        feature: torch.Tensor,
        embedding: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache | None,
        mask: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """feature, embedding [B, T, C]; positions [T]; mask [T, S] bool over (cached + new) keys.

        rope: (cos, sin) tables [P, head_dim] of positions 0..P-1 (`rope_cos_sin` of `arange(P)`), looked up
        instead of computing the angles (the same values); None computes them.
        Writes the T new K/V into `cache` (if given; anything with KVCache's `write` / `advance`,
        e.g. the autograd-safe `train_heads.ConcatCache`) and advances it. Returns the features [B, T, C]
        of the T tokens (feed them to `target.logits_from_hidden` for the next token's logits).
        """
        if rope is None:
            cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta)
        else:
            cos, sin = rope[0][positions][None, :, None], rope[1][positions][None, :, None]  # [1, T, 1, D]
        out = self.block(feature, embedding, cos, sin, cache, mask)
        if cache is not None:
            cache.advance(feature.shape[1])
        return out


class CombinedInputHead(RecurrentHead):
    """A head whose `combine` maps [feature ⊕ embedding] to one C-wide input of a standard decoder layer."""

    def __init__(self, cfg: Config, feature_layers: Sequence[int] = ()) -> None:
        super().__init__(cfg, feature_layers)
        self.layer = DecoderLayer(self.cfg, 0)

    def combine(self, feature: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def block(self, feature, embedding, cos, sin, cache, mask):
        return self.layer(self.combine(feature, embedding), cos, sin, cache, mask)


class EagleHead(CombinedInputHead):
    """EAGLE-1: fc over [feature ⊕ embedding] (2C -> C, with bias), then the decoder layer."""

    kind = "eagle"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.fc = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size)

    def combine(self, feature: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat((feature, embedding), dim=-1))


class Eagle3Layer(nn.Module):
    """EAGLE-3's draft layer (the reference's `midlayer`): attention reads [RMSNorm(embedding) ⊕
    RMSNorm(feature)], 2C wide; the feature, not normalized, is the residual; then the MLP as usual."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)  # on the embedding
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)  # on the feature
        self.self_attn = Attention(cfg, 0, input_size=2 * cfg.hidden_size)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, feature: torch.Tensor, embedding: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: KVCache | None, mask: torch.Tensor) -> torch.Tensor:
        """feature, embedding [B, T, C] -> [B, T, C] (RoPE tables, cache, mask as `Attention`)."""
        x = torch.cat((self.input_layernorm(embedding), self.hidden_norm(feature)), dim=-1)
        x = feature + self.self_attn(x, cos, sin, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Eagle3Head(RecurrentHead):
    """EAGLE-3: `fc` fuses three decoder layers' outputs (3C -> C, no bias); `midlayer` is `Eagle3Layer`.

    Parameter names are the reference checkpoint's (`fc`, `midlayer.*`), which `export_eagle3` writes for vLLM.
    """

    kind = "eagle3"

    def __init__(self, cfg: Config, feature_layers: Sequence[int] | None = None) -> None:
        super().__init__(cfg, feature_layers or fusion_layers(cfg.num_hidden_layers))
        self.fc = nn.Linear(len(self.feature_layers) * cfg.hidden_size, cfg.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(self.cfg)

    def encode(self, hidden: torch.Tensor, layers: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(layers) != len(self.feature_layers):
            raise ValueError(f"Eagle3Head needs the outputs of layers {self.feature_layers}, got {len(layers)} tensors")
        return self.fc(torch.cat(tuple(layers), dim=-1))

    def block(self, feature, embedding, cos, sin, cache, mask):
        return self.midlayer(feature, embedding, cos, sin, cache, mask)


class MTPHead(CombinedInputHead):
    """DeepSeek-V3 MTP module: proj([RMSNorm(feature) ⊕ RMSNorm(embedding)]) (2C -> C), then one block."""

    kind = "mtp"

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.embed_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.proj = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)

    def combine(self, feature: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.cat((self.hidden_norm(feature), self.embed_norm(embedding)), dim=-1))


def make_head(kind: str, cfg: Config, num_heads: int = 4, feature_layers: Sequence[int] | None = None) -> nn.Module:
    """A freshly initialized head of `kind` for a target with config `cfg`."""
    if kind == "medusa":
        return MedusaHeads(cfg.hidden_size, num_heads)
    if kind == "eagle":
        return EagleHead(cfg)
    if kind == "eagle3":
        return Eagle3Head(cfg, feature_layers)
    if kind == "mtp":
        return MTPHead(cfg)
    raise ValueError(f"unknown head kind {kind!r}; choose from {HEAD_KINDS}")
