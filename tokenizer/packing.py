"""Pack encoded documents into one token stream and cut it into training windows (B6).

Documents arrive already prefixed with `<|endoftext|>` (see `convention`), so concatenating them
puts the end-of-text token between documents. A stream of `n` tokens is read as windows of
`block_size + 1` tokens: window `i` is `stream[i*block_size : i*block_size + block_size + 1]`.
The model reads the first `block_size` tokens and predicts the last `block_size` (inputs and
targets shifted by one), and consecutive windows share one token, so every token but the first
is a target exactly once. Documents run across window boundaries; the tail that does not fill a
window is not used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

UINT16_VOCAB_LIMIT = 1 << 16


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits (vocab_size <= 65536), else uint32."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if vocab_size > 1 << 32:
        raise ValueError(f"vocab_size={vocab_size} does not fit in uint32 token ids")
    return np.dtype(np.uint16 if vocab_size <= UINT16_VOCAB_LIMIT else np.uint32)


@dataclass(frozen=True, slots=True)
class PackedStream:
    """Documents laid end to end."""

    tokens: np.ndarray
    """All token ids, documents back to back (1-D)."""
    doc_starts: np.ndarray
    """Index in `tokens` where each document (its leading EOT) starts, int64, ascending."""


def pack_documents(
    docs: Iterable[Sequence[int]], dtype: np.dtype | type = np.int64
) -> PackedStream:
    """Concatenate documents into one array of `dtype` and record where each begins."""
    docs = docs if isinstance(docs, list) else list(docs)
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    doc_starts = np.zeros(len(docs), dtype=np.int64)
    np.cumsum(lengths[:-1], out=doc_starts[1:])
    total = int(lengths.sum())
    tokens = np.fromiter(chain.from_iterable(docs), dtype=dtype, count=total)
    return PackedStream(tokens=tokens, doc_starts=doc_starts)


def num_windows(n_tokens: int, block_size: int) -> int:
    """How many full windows of `block_size + 1` tokens (sharing one token) fit in `n_tokens`."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    return max(0, (n_tokens - 1) // block_size)


def window(tokens: np.ndarray, i: int, block_size: int, offset: int = 0) -> np.ndarray:
    """Window `i` of `tokens` (a view, not a copy): `block_size + 1` tokens from
    `i*block_size + offset`, i.e. the windows of the stream with its first `offset` tokens cut."""
    if offset < 0:
        raise ValueError(f"window offset must be >= 0, got {offset}")
    n = num_windows(len(tokens) - offset, block_size)
    if not 0 <= i < n:
        raise IndexError(
            f"window {i} at offset {offset} out of range for {len(tokens)} tokens ({n} windows)"
        )
    start = i * block_size + offset
    return tokens[start : start + block_size + 1]
