"""Training windows read straight from memory-mapped token shards (no copy of the corpus in RAM).

`TokenDataset` is a map-style dataset (`len`, `[i]`) usable by a `torch.utils.data.DataLoader`.
Window `i` holds `block_size + 1` tokens (see `packing`); windows never cross shard boundaries,
so each shard's tail shorter than a window goes unused.

Opening a split reads its index (`split_index`) and nothing else, however many shards it has.
A shard's files are mapped when a window of it is first read, and at most `max_open_shards`
shards stay mapped (least recently used first out), so open files and memory mappings stay
bounded with any number of shards; document starts are mapped too, and only on use.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

import numpy as np

from lmforge.tokenizer.packing import window
from lmforge.tokenizer.shards import (
    DOCS_SUFFIX,
    TOKENS_SUFFIX,
    ShardInfo,
    map_doc_starts,
    map_tokens,
    shard_name,
)
from lmforge.tokenizer.split_index import SplitIndex, read_split_index

MAX_OPEN_SHARDS = 64
"""Shards kept mapped by default: at most two open files and two mappings each."""


def split_token_counts(out_dir: str | Path) -> dict[str, int]:
    """Tokens per split over every indexed split in `out_dir` (the index headers only are read)."""
    counts: dict[str, int] = {}
    for header in sorted(Path(out_dir).glob("*.index.json")):
        split = header.name.removesuffix(".index.json")
        counts[split] = int(read_split_index(Path(out_dir).joinpath, split).n_tokens.sum())
    return counts


class MappedShard:
    """One shard of an open split: its token stream mapped, its document starts on first use."""

    __slots__ = ("_docs_path", "_doc_starts", "info", "tokens")

    def __init__(self, info: ShardInfo, tokens_path: Path, docs_path: Path) -> None:
        self.info = info
        self.tokens = map_tokens(tokens_path, info)
        self._docs_path = docs_path
        self._doc_starts: np.ndarray | None = None

    @property
    def doc_starts(self) -> np.ndarray:
        """Start offset of every document in `tokens`, int64 (memory-mapped)."""
        if self._doc_starts is None:
            self._doc_starts = map_doc_starts(self._docs_path, self.info)
        return self._doc_starts


class ShardSequence(Sequence[MappedShard]):
    """The shards of a split in index order; each is opened when asked for."""

    def __init__(self, dataset: TokenDataset) -> None:
        self._dataset = dataset

    def __len__(self) -> int:
        return len(self._dataset.index)

    def __getitem__(self, k):  # type: ignore[override]
        if isinstance(k, slice):
            return [self._dataset.shard(i) for i in range(*k.indices(len(self)))]
        return self._dataset.shard(k)

    def __iter__(self) -> Iterator[MappedShard]:
        return (self._dataset.shard(k) for k in range(len(self)))


class TokenDataset:
    """All windows of one split, shard after shard in shard-index order."""

    def __init__(
        self,
        source: str | os.PathLike[str],
        split: str,
        block_size: int,
        max_offset: int = 0,
        max_open_shards: int = MAX_OPEN_SHARDS,
    ) -> None:
        """`source` is the directory of the split's shards and index: a path, or a path-like
        object with `glob` (a store's input artifact that fetches files as they are read) used as
        it is. `max_offset` > 0 keeps that many tokens of each shard spare, so that every window
        can also be read shifted by up to `max_offset` tokens (`window_at`): the same windows, new
        boundaries."""
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if not 0 <= max_offset <= block_size:
            raise ValueError(f"max_offset must be in [0, block_size], got {max_offset}")
        if max_open_shards < 1:
            raise ValueError(f"max_open_shards must be >= 1, got {max_open_shards}")
        # a store input (with `glob`, e.g. an InputPath) stays one: it maps its files lazily
        self.directory = cast(Path, source) if hasattr(source, "glob") else Path(source)
        self.split = split
        self.block_size = block_size
        self.max_offset = max_offset
        self.max_open_shards = max_open_shards
        self.index: SplitIndex = read_split_index(self.locate, split)
        if not len(self.index):
            raise FileNotFoundError(
                f"no committed {split!r} token shards in {source}; run the tokenize stage first"
            )
        self.vocab_size = self.index.vocab_size
        windows = (self.index.n_tokens - max_offset - 1) // block_size
        self._first_window = np.concatenate([[0], np.cumsum(np.maximum(windows, 0))])
        self._open: OrderedDict[int, MappedShard] = OrderedDict()
        self._lock = threading.Lock()
        self.shards = ShardSequence(self)
        """The shards in index order, opened on access (see `shard`)."""

    def locate(self, name: str) -> Path:
        """Where the file `name` of this split is read from: the one place that decides it."""
        return self.directory / name

    def shard(self, k: int) -> MappedShard:
        """Shard `k`, mapped now if it is not among the `max_open_shards` most recently used."""
        n = len(self.index)
        if not -n <= k < n:
            raise IndexError(f"shard {k} out of range: {self.split} has {n} shards")
        k %= n
        with self._lock:
            shard = self._open.get(k)
            if shard is not None:
                self._open.move_to_end(k)
                return shard
            stem = shard_name(self.split, k)
            shard = MappedShard(
                self.index.shard_info(k, self.directory),
                self.locate(f"{stem}{TOKENS_SUFFIX}"),
                self.locate(f"{stem}{DOCS_SUFFIX}"),
            )
            self._open[k] = shard
            if len(self._open) > self.max_open_shards:
                self._open.popitem(last=False)  # its maps close once no caller holds them
            return shard

    @property
    def open_shards(self) -> int:
        """Shards mapped right now (at most `max_open_shards`)."""
        return len(self._open)

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
        return window(self.shard(k).tokens, local, self.block_size, offset).astype(np.int64)

    @property
    def n_tokens(self) -> int:
        """Tokens over all shards of the split, EOT separators included."""
        return int(self.index.n_tokens.sum())

    @property
    def doc_offsets(self) -> np.ndarray:
        """Start of every document, as an offset into the shards laid end to end (int64)."""
        bases = np.concatenate([[0], np.cumsum(self.index.n_tokens[:-1])])
        parts = [s.doc_starts + base for s, base in zip(self.shards, bases, strict=True)]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    def __reduce__(self) -> tuple:
        # Reopen in the receiving process instead of pickling maps or their contents.
        args = (self.directory, self.split, self.block_size, self.max_offset, self.max_open_shards)
        return (TokenDataset, args)
