"""A split's token shards read as one stream, by position: the validation stream that scoring
actors each read their own ranges of, through the shards' memory maps.

The coordinator plans from the split's index (`plan_stream`: a small, picklable `StreamSpec`); every
actor opens the split itself (`TokenStream`, over `TokenDataset`, which maps shards lazily and
keeps a bounded number mapped) and copies out only the ranges it scores. The document of a
position is found in its shard's memory-mapped document starts, so no process holds the tokens
or an array of every document.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from lmforge.tokenizer.dataset import TokenDataset


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """A split's shards laid end to end in shard-index order, cut after `n_tokens` ids."""

    directory: str | os.PathLike
    """The directory of the split's shards and index: a local path, or a bucket input
    (`InputPath`) that every actor reads through its own node's cache, block by block (never
    `str()`ed: that would fetch the whole artifact)."""
    split: str
    n_tokens: int
    """Ids in the stream (the split's, or fewer when capped)."""
    n_docs: int
    """Documents that start inside the stream."""
    vocab_size: int
    """Vocabulary of the tokenizer that wrote the shards."""


def plan_stream(source: str | os.PathLike[str], split: str, max_tokens: int = 0) -> StreamSpec:
    """The stream of `split`'s shards under `source`, at most `max_tokens` ids (0 = all)."""
    dataset = TokenDataset(source, split, block_size=1)
    sizes, docs = dataset.index.n_tokens, dataset.index.n_docs
    n_tokens = int(sizes.sum()) if not max_tokens else min(max_tokens, int(sizes.sum()))
    n_docs = 0
    if n_tokens:
        bases = np.concatenate([[0], np.cumsum(sizes)])
        last = int(np.searchsorted(bases, n_tokens, side="left")) - 1  # the shard it ends in
        starts = dataset.shard(last).doc_starts
        inside = int(np.searchsorted(starts, n_tokens - bases[last], side="left"))
        n_docs = int(docs[:last].sum()) + inside
    return StreamSpec(source, split, n_tokens, n_docs, dataset.vocab_size)


class TokenStream:
    """Ranges of a planned stream, copied out of the shards' memory maps as int64."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        self._dataset = TokenDataset(spec.directory, spec.split, block_size=1)
        index = self._dataset.index
        self._bases = np.concatenate([[0], np.cumsum(index.n_tokens)]).astype(np.int64)
        self._first_doc = np.concatenate([[0], np.cumsum(index.n_docs)]).astype(np.int64)

    def _shard_at(self, position: int) -> int:
        return int(np.searchsorted(self._bases, position, side="right")) - 1

    def read(self, begin: int, end: int) -> np.ndarray:
        """Ids [begin, end) of the stream, across shard boundaries."""
        if not 0 <= begin <= end <= self.spec.n_tokens:
            raise IndexError(f"range [{begin}, {end}) outside the stream of {self.spec.n_tokens}")
        out = np.empty(end - begin, dtype=np.int64)
        at, k = begin, self._shard_at(begin)
        while at < end:
            base, stop = int(self._bases[k]), min(end, int(self._bases[k + 1]))
            if stop > at:  # an empty shard holds nothing
                out[at - begin : stop - begin] = self._dataset.shard(k).tokens[
                    at - base : stop - base
                ]
                at = stop
            k += 1
        return out

    def documents(self, positions: np.ndarray) -> np.ndarray:
        """Index of the document each id position (ascending) belongs to: the last document
        start at or before it. Every shard begins with a document, so it is in its shard."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty(positions.size, dtype=np.int64)
        shards = np.searchsorted(self._bases, positions, side="right") - 1
        for k in np.unique(shards):
            rows = shards == k
            local = positions[rows] - self._bases[k]
            starts = self._dataset.shard(int(k)).doc_starts
            inside = np.searchsorted(starts, local, side="right") - 1
            out[rows] = self._first_doc[k] + np.maximum(inside, 0)
        return out
