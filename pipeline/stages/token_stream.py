"""A split's token shards read as one stream, by position: the validation stream that scoring
actors each read their own ranges of, through the shards' memory maps.

The driver plans from the shard headers (`plan_stream`: a small, picklable `StreamSpec`); every
actor opens the shards itself (`TokenStream`) and copies out only the ranges it scores. An actor
holds the start offset of every document in the stream (8 bytes a document), so that it can sum
losses by document; no process holds the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmforge.tokenizer.dataset import find_shard_headers
from lmforge.tokenizer.shards import TokenShard, read_shard


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """A split's shards laid end to end in shard-index order, cut after `n_tokens` ids."""

    headers: tuple[str, ...]
    """Shard headers in stream order."""
    n_tokens: int
    """Ids in the stream (the split's, or fewer when capped)."""
    n_docs: int
    """Documents that start inside the stream."""
    vocab_size: int
    """Vocabulary of the tokenizer that wrote the shards."""


def _open_in_order(source: str | Path, split: str) -> list[TokenShard]:
    headers = find_shard_headers(source, split)
    if not headers:
        raise FileNotFoundError(
            f"no committed {split!r} token shards in {source}; run the tokenize stage first"
        )
    return sorted((read_shard(h) for h in headers), key=lambda s: s.info.index)


def plan_stream(source: str | Path, split: str, max_tokens: int = 0) -> StreamSpec:
    """The stream of `split`'s shards under `source`, at most `max_tokens` ids (0 = all)."""
    headers, n_tokens, n_docs, vocab = [], 0, 0, set()
    for shard in _open_in_order(source, split):
        if max_tokens and n_tokens >= max_tokens:
            break
        take = (
            min(max_tokens - n_tokens, shard.info.n_tokens) if max_tokens else shard.info.n_tokens
        )
        headers.append(str(shard.info.header))
        vocab.add(shard.info.vocab_size)
        n_docs += int(np.searchsorted(shard.doc_starts, take, side="left"))
        n_tokens += take
    if len(vocab) > 1:
        raise ValueError(f"{split} shards in {source} mix vocab sizes {sorted(vocab)}")
    return StreamSpec(tuple(headers), n_tokens, n_docs, vocab.pop() if vocab else 0)


class TokenStream:
    """Ranges of a planned stream, copied out of the shards' memory maps as int64."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        shards = [read_shard(h) for h in spec.headers]
        self._tokens = [s.tokens for s in shards]  # memory maps; the shards' indexes are dropped
        self._bases = np.cumsum([0] + [s.info.n_tokens for s in shards], dtype=np.int64)
        parts = [s.doc_starts + b for s, b in zip(shards, self._bases[:-1], strict=True)]
        offsets = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        self.doc_offsets: np.ndarray = offsets[: spec.n_docs].copy()
        """Start of every document of the stream, ascending."""

    def read(self, begin: int, end: int) -> np.ndarray:
        """Ids [begin, end) of the stream, across shard boundaries."""
        if not 0 <= begin <= end <= self.spec.n_tokens:
            raise IndexError(f"range [{begin}, {end}) outside the stream of {self.spec.n_tokens}")
        out = np.empty(end - begin, dtype=np.int64)
        first = int(np.searchsorted(self._bases, begin, side="right")) - 1
        at = begin
        for tokens, base in zip(self._tokens[first:], self._bases[first:-1], strict=True):
            if at >= end:
                break
            stop = min(end, base + len(tokens))
            if stop > at:  # an empty shard holds nothing
                out[at - begin : stop - begin] = tokens[at - base : stop - base]
                at = stop
        return out

    def documents(self, positions: np.ndarray) -> np.ndarray:
        """Index of the document each id position belongs to (the last start <= position)."""
        return np.maximum(np.searchsorted(self.doc_offsets, positions, side="right") - 1, 0)
