"""Absolute position encodings added to the token embeddings: learned (A3) or sinusoidal (A4)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def sinusoidal_table(n_positions: int, d_model: int, base: float = 10000.0) -> Tensor:
    """The fixed [n_positions x d_model] table of Vaswani et al.

    PE(pos, 2i) = sin(pos / base^(2i/d)) and PE(pos, 2i+1) = cos(pos / base^(2i/d)).
    The slide table of the reference texts (T5) uses base 100; the paper's formula uses 10000.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal_table needs an even d_model, got {d_model}")
    pos = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / base ** (two_i / d_model)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.to(torch.get_default_dtype())


class SinusoidalPositions(nn.Module):
    """Looks positions up in a fixed sinusoidal table (a buffer, not a parameter, not saved)."""

    def __init__(self, n_positions: int, d_model: int, base: float = 10000.0) -> None:
        super().__init__()
        table = sinusoidal_table(n_positions, d_model, base)
        self.register_buffer("table", table, persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        return self.table[positions]


def position_encoding(kind: str, n_positions: int, d_model: int, base: float) -> nn.Module:
    """A module mapping position ids [..., T] to vectors [..., T, d_model]."""
    if kind == "learned":
        return nn.Embedding(n_positions, d_model)
    if kind == "sinusoidal":
        return SinusoidalPositions(n_positions, d_model, base)
    raise ValueError(f"model.positions must be 'learned' or 'sinusoidal', got {kind!r}")
