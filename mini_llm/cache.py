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
        self.slot_ids = torch.arange(max_len, device=device)  # positions of a uniform cache are views of it
        self._slots_key: tuple | None = None  # (lengths, T, device) of the cached per-row write index
        self._slots = torch.empty(0, dtype=torch.long, device=device)

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

    def positions(self, n_new: int, device: torch.device) -> torch.Tensor:
        """Default positions of `n_new` new tokens: row b's length + arange(n_new) -> LongTensor [B, n_new]
        (a view of `slot_ids` when every row has the same length: a decode step builds no tensor)."""
        if self.uniform:
            start = self.lengths[0]
            return self.slot_ids[start:start + n_new].expand(self.batch_size, n_new)
        return torch.tensor(self.lengths, device=device)[:, None] + torch.arange(n_new, device=device)

    def attention_mask(self, n_new: int, mask: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
        """Which slots each of `n_new` new tokens may read (see `attention_mask`); None = all of them."""
        return attention_mask(n_new, self.lengths, mask, device)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [B, n_kv, T, D] at the next T slots of each row of `layer`; return the keys/values of
        slots [0, max(lengths) + T) (row b's new ones at [lengths[b], lengths[b] + T)).

        Does not advance the lengths: the model does that once after the last layer.
        """
        start, end = self.reserve(k.shape[2])
        keys, values = self.k[layer], self.v[layer]  # [B, n_kv, max_len, D] views
        with self._writable():
            if self.uniform:
                keys[:, :, start:end] = k
                values[:, :, start:end] = v
            else:  # row b writes at its own offset: copy the [B * n_kv * T] vectors to their flat slots
                index = self._row_slots(k.shape[2], k.device)
                keys.view(-1, k.shape[3]).index_copy_(0, index, k.reshape(-1, k.shape[3]))
                values.view(-1, v.shape[3]).index_copy_(0, index, v.reshape(-1, v.shape[3]))
        return keys[:, :, :end], values[:, :, :end]

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
        if isinstance(keep, torch.Tensor):
            if keep.ndim != 1:
                raise ValueError(f"keep must be 1-D, got shape {tuple(keep.shape)}")
            keep = keep.tolist()
        keep = [int(i) for i in keep]  # checked on the host: a path of a few nodes, no tensor operations
        n = len(keep)
        if n and (keep[0] < 0 or start + keep[-1] >= length):
            raise ValueError(f"compact: slots start+keep must lie in [{start}, {length}), got keep={keep}")
        if any(b <= a for a, b in zip(keep, keep[1:])):
            raise ValueError(f"compact: keep must be strictly increasing, got {keep}")
        if not 0 <= start <= length:
            raise ValueError(f"compact: start={start} outside [0, length={length}]")
        if keep != list(range(n)):
            src = torch.tensor(keep, device=self.k.device) + start
            sel = slice(None) if row is None else slice(row, row + 1)
            with self._writable():
                self.k[:, sel, :, start:start + n] = self.k[:, sel].index_select(3, src)
                self.v[:, sel, :, start:start + n] = self.v[:, sel].index_select(3, src)
        for r in rows:
            self.lengths[r] = start + n

    def select_rows(self, rows: Sequence[int]) -> None:
        """Keep only the batch rows `rows`, in that order (e.g. drop sequences that finished)."""
        index = torch.as_tensor(list(rows), dtype=torch.long, device="cpu")
        if index.ndim != 1 or not len(index) or not all(0 <= r < self.batch_size for r in index.tolist()):
            raise ValueError(f"select_rows: rows must be a non-empty list of indices below {self.batch_size}, got {rows}")
        index = index.to(self.k.device)
        with self._writable():
            self.k, self.v = self.k.index_select(1, index), self.v.index_select(1, index)
        self.lengths = [self.lengths[r] for r in rows]


def attention_mask(
    T: int, lengths: Sequence[int], mask: torch.Tensor | None, device: torch.device
) -> torch.Tensor | None:
    """Which cache slots each of T new tokens may read: [T, S] when every row has the same length and
    shares `mask`, else [B, T, S] (S = max(lengths) + T); None when that is every slot (one new token).

    Row b sees its prefix [0, lengths[b]) and its new tokens per `mask` ([T, T] or [B, T, T] bool, True =
    may attend; default causal), never another row's longer prefix or stale slots.
    """
    B = len(lengths)
    if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) not in ((T, T), (B, T, T))):
        raise ValueError(
            f"mask must be a [{T}, {T}] or [{B}, {T}, {T}] bool tensor, got {tuple(mask.shape)} {mask.dtype}"
        )
    start = max(lengths)
    if min(lengths) == start and (mask is None or mask.ndim == 2):
        if mask is None:
            return None if T == 1 else torch.ones(T, start + T, dtype=torch.bool, device=device).tril(start)
        return torch.cat((torch.ones(T, start, dtype=torch.bool, device=device), mask.to(device)), dim=1)
    new = torch.ones(T, T, dtype=torch.bool, device=device).tril() if mask is None else mask.to(device)
    rel = torch.arange(start + T, device=device) - torch.tensor(lengths, device=device)[:, None]  # [B, S]
    among_new = new.expand(B, T, T).gather(2, rel.clamp(0, T - 1)[:, None, :].expand(B, T, start + T))
    return (rel < 0)[:, None, :] | (among_new & (rel >= 0)[:, None, :] & (rel < T)[:, None, :])


class FixedShapeCache:
    """A KV cache with fixed shapes, for CUDA graphs: its length lives on the device.

    k, v: [n_layers, 1, n_kv_heads, max_len, head_dim]; length: LongTensor [] on the device. Every forward
    reads all max_len slots under a mask (slots at or past the length are masked out) and writes its T new
    K/V with `index_copy_` at slots length + arange(T). No method reads a device value on the host, so a
    decode loop over it never waits for the GPU, and the same kernels with the same shapes run every step,
    which is what a CUDA graph replays. The price: attention reads max_len slots, not length (as in gpt-fast).
    Batch size 1.
    """

    batch_size = 1

    def __init__(
        self, cfg: Config, max_len: int, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
    ) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be positive, got {max_len}")
        shape = (cfg.num_hidden_layers, 1, cfg.num_key_value_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.max_len = max_len
        self.length = torch.zeros((), dtype=torch.long, device=device)
        self.slots = torch.arange(max_len, device=device)

    def __repr__(self) -> str:
        return f"FixedShapeCache(max_len={self.max_len}, length on {self.length.device})"

    def reserve(self, n_new: int) -> None:
        """Only the shape can be checked on the host; the loop that drives the cache sizes max_len."""
        if n_new > self.max_len:
            raise ValueError(f"{n_new} new tokens > max_len={self.max_len}")

    def positions(self, n_new: int, device: torch.device | None = None) -> torch.Tensor:
        """length + arange(n_new) -> LongTensor [1, n_new], computed on the device."""
        return (self.length + self.slots[:n_new])[None]

    def attention_mask(self, n_new: int, mask: torch.Tensor | None, device: torch.device | None = None) -> torch.Tensor:
        """bool [T, max_len]: slots before the length are visible, the T new tokens' slots per `mask`
        ([T, T] bool among them, default causal), every later slot hidden."""
        T = n_new
        if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != (T, T)):
            raise ValueError(f"mask must be a [{T}, {T}] bool tensor, got {tuple(mask.shape)} {mask.dtype}")
        new = torch.ones(T, T, dtype=torch.bool, device=self.slots.device).tril() if mask is None else mask
        rel = self.slots - self.length  # [S]: slot index relative to the first new token
        among_new = new.gather(1, rel.clamp(0, T - 1).expand(T, self.max_len))
        return (rel < 0) | (among_new & (rel >= 0) & (rel < T))

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v [1, n_kv, T, D] at slots length + arange(T); return all slots' keys and values
        [1, n_kv, max_len, D]. Does not advance the length (the model does, after the last layer)."""
        slots = self.length + self.slots[: k.shape[2]]
        with torch.inference_mode(self.k.is_inference()):
            self.k[layer].index_copy_(2, slots, k)
            self.v[layer].index_copy_(2, slots, v)
        return self.k[layer], self.v[layer]

    def advance(self, n_new: int) -> None:
        with torch.inference_mode(self.length.is_inference()):
            self.length += n_new

    def truncate(self, n: torch.Tensor | int) -> None:
        """Set the length to n (a device scalar or an int): rollback without a host sync."""
        with torch.inference_mode(self.length.is_inference()):
            self.length.copy_(torch.as_tensor(n, device=self.length.device))

    def compact(self, start: torch.Tensor, keep: torch.Tensor, n_kept: torch.Tensor) -> None:
        """Move slots start + keep[i] to start + i for every i of keep [m] (device; padded past n_kept with
        any valid slot) and set the length to start + n_kept: an accepted tree path kept in fixed shapes."""
        m = keep.shape[0]
        src, dst = start + keep, start + self.slots[:m]
        with torch.inference_mode(self.k.is_inference()):
            self.k.index_copy_(3, dst, self.k.index_select(3, src))
            self.v.index_copy_(3, dst, self.v.index_select(3, src))
            self.length.copy_(start + n_kept)
