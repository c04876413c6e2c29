"""Training windows read straight from memory-mapped token shards (no copy of the corpus in RAM).

`TokenDataset` is a map-style dataset (`len`, `[i]`) usable by a `torch.utils.data.DataLoader`.
Window `i` holds `block_size + 1` tokens (see `packing`); windows never cross shard boundaries,
so each shard's tail shorter than a window goes unused.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lmforge.tokenizer.packing import num_windows, window
from lmforge.tokenizer.shards import HEADER_SUFFIX, TokenShard, read_shard


def find_shard_headers(source: str | Path | Sequence[str | Path], split: str) -> list[Path]:
    """Headers of `split`'s committed shards under `source` (directories or header files).

    A path-like object with `glob` (such as a store's lazily fetched input artifact) is used as
    it is, so its shards' files are read through it rather than through a local copy."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    headers: list[Path] = []
    for item in (i if hasattr(i, "glob") else Path(i) for i in items):
        if item.is_dir():
            headers += sorted(item.glob(f"{split}-*{HEADER_SUFFIX}"))
        elif item.name.endswith(HEADER_SUFFIX) and item.is_file():
            headers.append(item)
        else:
            raise FileNotFoundError(f"{item} is neither a shard directory nor a shard header")
    return headers


def split_token_counts(out_dir: str | Path) -> dict[str, int]:
    """Tokens per split over every committed shard in `out_dir` (headers only are read)."""
    counts: dict[str, int] = {}
    for header in sorted(Path(out_dir).glob(f"*{HEADER_SUFFIX}")):
        info = read_shard(header).info
        counts[info.split] = counts.get(info.split, 0) + info.n_tokens
    return counts


class TokenDataset:
    """All windows of one split, shard after shard in shard-index order."""

    def __init__(
        self,
        source: str | Path | Sequence[str | Path],
        split: str,
        block_size: int,
        max_offset: int = 0,
    ) -> None:
        """`max_offset` > 0 keeps that many tokens of each shard spare, so that every window can
        also be read shifted by up to `max_offset` tokens (`window_at`): the same windows, new
        boundaries."""
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if not 0 <= max_offset <= block_size:
            raise ValueError(f"max_offset must be in [0, block_size], got {max_offset}")
        headers = find_shard_headers(source, split)
        if not headers:
            raise FileNotFoundError(
                f"no committed {split!r} token shards in {source}; run the tokenize stage first"
            )
        shards = [read_shard(h) for h in headers]
        for shard in shards:
            if shard.info.split != split:
                raise ValueError(f"{shard.info.header}: header says split {shard.info.split!r}")
        shards.sort(key=lambda s: s.info.index)
        vocab_sizes = {s.info.vocab_size for s in shards}
        if len(vocab_sizes) > 1:
            raise ValueError(f"{split} shards in {source} mix vocab sizes {sorted(vocab_sizes)}")
        self.split = split
        self.block_size = block_size
        self.max_offset = max_offset
        self.shards: tuple[TokenShard, ...] = tuple(shards)
        self.vocab_size = vocab_sizes.pop() if vocab_sizes else 0
        windows = [num_windows(s.info.n_tokens - max_offset, block_size) for s in shards]
        self._first_window = np.concatenate([[0], np.cumsum(windows)]).astype(np.int64)
        self._headers = [s.info.header for s in shards]

    def __len__(self) -> int:
        return int(self._first_window[-1])

    def __getitem__(self, i: int) -> np.ndarray:
        """Window `i` as int64 (`block_size + 1` tokens), copied out of the memory map."""
        return self.window_at(i, 0)

    def window_at(self, i: int, offset: int) -> np.ndarray:
        """Window `i` shifted `offset` tokens later in its shard (0 <= offset <= max_offset)."""
        if not 0 <= offset <= self.max_offset:
            raise IndexError(f"offset {offset} outside [0, {self.max_offset}]")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"window {i} out of range: {self.split} has {n} windows")
        i %= n
        k = int(np.searchsorted(self._first_window, i, side="right")) - 1
        local = i - int(self._first_window[k])
        return window(self.shards[k].tokens, local, self.block_size, offset).astype(np.int64)

    @property
    def n_tokens(self) -> int:
        """Tokens over all shards of the split, EOT separators included."""
        return sum(s.info.n_tokens for s in self.shards)

    @property
    def doc_offsets(self) -> np.ndarray:
        """Start of every document, as an offset into the shards laid end to end (int64)."""
        bases = np.cumsum([0] + [s.info.n_tokens for s in self.shards[:-1]])
        parts = [s.doc_starts + base for s, base in zip(self.shards, bases, strict=True)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def __reduce__(self) -> tuple:
        # Reopen the memory maps in the receiving process instead of pickling their contents.
        return (TokenDataset, (self._headers, self.split, self.block_size, self.max_offset))
