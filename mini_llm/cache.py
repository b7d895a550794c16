"""A preallocated, position-indexed KV cache: rollback moves a length, keeping a tree path compacts slots.

Every row of the batch has its own length, so rows of different lengths share one cache and roll back
(`truncate`) or keep a tree path (`compact`) independently. With one length for all rows (batch 1, or a
batch that moves in step) `cache.length` reads and sets it as a plain int.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .config import Config


class KVCache:
    """Keys and values of every layer in two preallocated tensors.

    k, v: [n_layers, batch, n_kv_heads, max_len, head_dim]. Row b's slots `[0, lengths[b])` hold its
    committed sequence; a forward of T new tokens writes row b's slots `[lengths[b], lengths[b] + T)`
    and advances every row by T.
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
        self.lengths = [0] * batch_size  # committed slots per row
        self._slots_key: tuple | None = None  # (lengths, T, device) of the cached per-row write index
        self._slots = torch.empty(0, dtype=torch.long)

    def __repr__(self) -> str:
        shown = self.lengths[0] if self.uniform else self.lengths
        return f"KVCache(length={shown}, max_len={self.max_len}, batch_size={self.batch_size})"

    @property
    def batch_size(self) -> int:
        return len(self.lengths)

    @property
    def uniform(self) -> bool:
        """True when every row has the same length."""
        return min(self.lengths) == max(self.lengths)

    @property
    def length(self) -> int:
        """The common length of all rows (ValueError if rows differ: read `lengths` then)."""
        if not self.uniform:
            raise ValueError(f"rows have different lengths {self.lengths}: read cache.lengths")
        return self.lengths[0]

    @length.setter
    def length(self, n: int) -> None:
        self.lengths = [int(n)] * self.batch_size

    def _writable(self) -> torch.inference_mode:
        """A cache made under torch.inference_mode holds inference tensors, writable only in that mode."""
        return torch.inference_mode(self.k.is_inference())

    def reserve(self, n_new: int) -> tuple[int, int]:
        """Check that `n_new` more tokens fit in every row; return the slot range `[start, end)` of the
        longest row (for a uniform cache: the slots the new tokens will use)."""
        end = max(self.lengths) + n_new
        if end > self.max_len:
            raise ValueError(
                f"KV cache overflow: {max(self.lengths)} cached + {n_new} new tokens > max_len={self.max_len}"
            )
        return end - n_new, end

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, n_kv, T, D] at the next T slots of each row of `layer`; return the keys/values of
        slots [0, max(lengths) + T) (row b's new ones at [lengths[b], lengths[b] + T)).

        Does not advance the lengths: the model does that once after the last layer.
        """
        start, end = self.reserve(k.shape[2])
        with self._writable():
            if self.uniform:
                self.k[layer, :, :, start:end] = k
                self.v[layer, :, :, start:end] = v
            else:  # row b writes at its own offset: copy the [B * n_kv * T] vectors to their flat slots
                index = self._row_slots(k.shape[2], k.device)
                self.k[layer].view(-1, k.shape[3]).index_copy_(0, index, k.reshape(-1, k.shape[3]))
                self.v[layer].view(-1, v.shape[3]).index_copy_(0, index, v.reshape(-1, v.shape[3]))
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def _row_slots(self, n_new: int, device: torch.device) -> torch.Tensor:
        """Flat indices into k[layer].view(-1, head_dim) of slot lengths[b] + t of row b, head h, ordered
        (b, h, t) like k.reshape(-1, head_dim); computed once per forward and reused by every layer."""
        key = (tuple(self.lengths), n_new, device)
        if self._slots_key != key:
            B, H, L = self.batch_size, self.k.shape[2], self.max_len
            slots = torch.tensor(self.lengths, device=device)[:, None] + torch.arange(n_new, device=device)  # [B, T]
            rows = torch.arange(B, device=device)[:, None, None] * H + torch.arange(H, device=device)[:, None]
            self._slots_key, self._slots = key, (rows * L + slots[:, None, :]).flatten()  # [B * H * T]
        return self._slots

    def advance(self, n_new: int) -> None:
        self.reserve(n_new)
        self.lengths = [n + n_new for n in self.lengths]

    def truncate(self, n: int | Sequence[int]) -> None:
        """Roll back to the first `n` slots (an int for every row, or one length per row); later slots are
        overwritten by the next forward (rollback = not advancing, as in gpt-fast)."""
        new = [int(n)] * self.batch_size if isinstance(n, int) else [int(x) for x in n]
        if len(new) != self.batch_size or not all(0 <= x <= old for x, old in zip(new, self.lengths)):
            raise ValueError(f"truncate({n}) outside [0, lengths={self.lengths}]")
        self.lengths = new

    def compact(self, start: int, keep: Sequence[int] | torch.Tensor, row: int | None = None) -> None:
        """Move slots `start + keep[i]` to `start + i` and set the length to `start + len(keep)`, in every
        row (`row=None`, which needs a uniform cache) or in row `row` only.

        This keeps an accepted tree path (its KV were computed when the tree was verified) and drops
        the rejected branches, without recomputing anything. `keep` must be strictly increasing.
        """
        rows = list(range(self.batch_size)) if row is None else [row]
        length = self.length if row is None else self.lengths[row]
        keep = torch.as_tensor(keep, dtype=torch.long).cpu()
        if keep.ndim != 1:
            raise ValueError(f"keep must be 1-D, got shape {tuple(keep.shape)}")
        n = len(keep)
        if n and (keep[0] < 0 or start + int(keep[-1]) >= length):
            raise ValueError(f"compact: slots start+keep must lie in [{start}, {length}), got keep={keep.tolist()}")
        if n > 1 and not bool((keep[1:] > keep[:-1]).all()):
            raise ValueError(f"compact: keep must be strictly increasing, got {keep.tolist()}")
        if not 0 <= start <= length:
            raise ValueError(f"compact: start={start} outside [0, length={length}]")
        if n and not torch.equal(keep, torch.arange(n)):
            src = (keep + start).to(self.k.device)
            sel = slice(None) if row is None else slice(row, row + 1)
            with self._writable():
                self.k[:, sel, :, start:start + n] = self.k[:, sel].index_select(3, src)
                self.v[:, sel, :, start:start + n] = self.v[:, sel].index_select(3, src)
        for r in rows:
            self.lengths[r] = start + n

    def select_rows(self, rows: Sequence[int]) -> None:
        """Keep only the batch rows `rows`, in that order (e.g. drop sequences that finished)."""
        index = torch.as_tensor(list(rows), dtype=torch.long)
        if index.ndim != 1 or not len(index) or not all(0 <= r < self.batch_size for r in index.tolist()):
            raise ValueError(f"select_rows: rows must be a non-empty list of indices below {self.batch_size}, got {rows}")
        index = index.to(self.k.device)
        with self._writable():
            self.k, self.v = self.k.index_select(1, index), self.v.index_select(1, index)
        self.lengths = [self.lengths[r] for r in rows]
