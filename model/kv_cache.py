"""Keys and values of already-processed positions, kept between generation steps.

With a cache, each decoding step feeds only the new token(s): every layer appends their keys and
values here and attends over everything stored so far, instead of recomputing the whole prefix.
Buffers are allocated once for `max_len` positions, so appending is a copy, not a concatenation.
"""

from __future__ import annotations

import torch
from torch import Tensor


class LayerKV:
    """One layer's preallocated key/value buffers [B, n_head, max_len, head_dim]."""

    def __init__(self, keys: Tensor, values: Tensor) -> None:
        self.keys = keys
        self.values = values
        self.length = 0
        """Number of positions stored so far."""

    @property
    def capacity(self) -> int:
        return self.keys.size(2)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store k, v [B, n_head, T, head_dim] after the past; return all keys and values so far."""
        end = self.length + k.size(2)
        if end > self.capacity:
            raise ValueError(
                f"KV cache holds at most {self.capacity} positions, {end} requested; "
                "crop the context (generate() does) or build a larger cache"
            )
        self.keys[:, :, self.length : end] = k
        self.values[:, :, self.length : end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]


class KVCache:
    """A LayerKV for every block of a model, all at the same length."""

    def __init__(
        self,
        *,
        n_layer: int,
        batch_size: int,
        n_head: int,
        head_dim: int,
        max_len: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        shape = (batch_size, n_head, max_len, head_dim)
        self.layers = [
            LayerKV(
                torch.empty(shape, dtype=dtype, device=device),
                torch.empty(shape, dtype=dtype, device=device),
            )
            for _ in range(n_layer)
        ]

    @property
    def length(self) -> int:
        """Positions already processed (the position id offset of the next token)."""
        return self.layers[0].length

    @property
    def capacity(self) -> int:
        return self.layers[0].capacity
