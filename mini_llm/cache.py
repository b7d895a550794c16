"""A preallocated, position-indexed KV cache: rollback moves a length, keeping a tree path compacts slots."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .config import Config


class KVCache:
    """Keys and values of every layer in two preallocated tensors.

    k, v: [n_layers, batch, n_kv_heads, max_len, head_dim]. Slots `[0, length)` hold the committed
    sequence; a forward of T new tokens writes slots `[length, length + T)` and advances `length`.
    """

    def __init__(
        self,
        cfg: Config,
        batch_size: int = 1,
        max_len: int = 2048,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"batch_size and max_len must be positive, got {batch_size} and {max_len}")
        shape = (cfg.num_hidden_layers, batch_size, cfg.num_key_value_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_len = max_len
        self.batch_size = batch_size
        self.length = 0

    def __repr__(self) -> str:
        return f"KVCache(length={self.length}, max_len={self.max_len}, batch_size={self.batch_size})"

    def _writable(self) -> torch.inference_mode:
        """A cache made under torch.inference_mode holds inference tensors, writable only in that mode."""
        return torch.inference_mode(self.k.is_inference())

    def reserve(self, n_new: int) -> tuple[int, int]:
        """Check that `n_new` more tokens fit; return the slot range `[start, end)` they will use."""
        end = self.length + n_new
        if end > self.max_len:
            raise ValueError(
                f"KV cache overflow: {self.length} cached + {n_new} new tokens > max_len={self.max_len}"
            )
        return self.length, end

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, n_kv, T, D] at the next T slots of `layer`; return all keys/values so far.

        Does not advance `length`: the model does that once after the last layer.
        """
        start, end = self.reserve(k.shape[2])
        with self._writable():
            self.k[layer, :, :, start:end] = k
            self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, n_new: int) -> None:
        self.length = self.reserve(n_new)[1]

    def truncate(self, n: int) -> None:
        """Roll back to the first `n` slots; later slots are overwritten by the next forward."""
        if not 0 <= n <= self.length:
            raise ValueError(f"truncate({n}) outside [0, length={self.length}]")
        self.length = n

    def compact(self, start: int, keep: Sequence[int] | torch.Tensor) -> None:
        """Move slots `start + keep[i]` to `start + i` and set `length = start + len(keep)`.

        This keeps an accepted tree path (its KV were computed when the tree was verified) and drops
        the rejected branches, without recomputing anything. `keep` must be strictly increasing.
        """
        keep = torch.as_tensor(keep, dtype=torch.long).cpu()
        if keep.ndim != 1:
            raise ValueError(f"keep must be 1-D, got shape {tuple(keep.shape)}")
        n = len(keep)
        if n and (keep[0] < 0 or start + int(keep[-1]) >= self.length):
            raise ValueError(f"compact: slots start+keep must lie in [{start}, {self.length}), got keep={keep.tolist()}")
        if n > 1 and not bool((keep[1:] > keep[:-1]).all()):
            raise ValueError(f"compact: keep must be strictly increasing, got {keep.tolist()}")
        if not 0 <= start <= self.length:
            raise ValueError(f"compact: start={start} outside [0, length={self.length}]")
        if n and not torch.equal(keep, torch.arange(n)):
            src = (keep + start).to(self.k.device)
            with self._writable():
                self.k[:, :, :, start:start + n] = self.k.index_select(3, src)
                self.v[:, :, :, start:start + n] = self.v.index_select(3, src)
        self.length = start + n
