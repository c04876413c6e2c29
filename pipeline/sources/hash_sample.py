"""A deterministic, byte-bounded sample of a clean split, chosen by hash of the document id.

A document is in the sample when a seeded 64-bit xxhash of its id falls under a threshold set
from the split's total text bytes, so the sample holds about `sample_bytes` of text and depends
only on which documents the split holds, never on how they are cut into shards or in what order
the shards are read. The split is read twice, one record batch at a time: once for its size
(text lengths counted in Arrow) and once to stream the sampled texts; nothing is held beyond a
batch. The hash is not `split_of`'s SHA-256, which decided train/val: reusing it would sample
from a range of hashes that the train split does not hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from lmforge.pipeline.sources.parquet_shards import shard_paths

if TYPE_CHECKING:
    from lmforge.pipeline.storage.input_artifact import ArtifactPath

SAMPLE_SEED = 0x5A3D1E
"""xxhash seed of the sample; a change picks other documents."""
HASH_RANGE = 1 << 64


def sample_hash(doc_id: str) -> int:
    """The 64-bit hash that decides whether `doc_id` is in the sample."""
    return xxhash.xxh3_64_intdigest(doc_id.encode("utf-8"), seed=SAMPLE_SEED)


def sample_threshold(sample_bytes: int, total_bytes: int) -> int:
    """Hashes below this are sampled: all of them when sample_bytes is 0 or >= the split."""
    if sample_bytes <= 0 or sample_bytes >= total_bytes:
        return HASH_RANGE
    return sample_bytes * HASH_RANGE // total_bytes


@dataclass(frozen=True, slots=True)
class SampleStats:
    """What was sampled from the split, and how much the split holds."""

    split_docs: int
    split_bytes: int
    sample_docs: int
    sample_bytes: int

    def to_summary(self) -> dict[str, int | float]:
        fraction = self.sample_bytes / self.split_bytes if self.split_bytes else 1.0
        return {
            "train_docs": self.split_docs,
            "train_text_bytes": self.split_bytes,
            "sample_docs": self.sample_docs,
            "sample_text_bytes": self.sample_bytes,
            "sample_fraction": round(fraction, 6),
        }


def _batches(
    clean_dir: ArtifactPath,
    split: str,
    columns: list[str],
    exclude: tuple[str, ...],
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """Record batches of `split` without the rows whose source is in `exclude`."""
    for path in shard_paths(clean_dir, split):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns):
            if exclude:
                mask = pc.invert(pc.is_in(batch.column("source"), value_set=pa.array(exclude)))
                batch = batch.filter(mask)
            yield batch


def split_size(
    clean_dir: ArtifactPath, split: str, exclude: tuple[str, ...] = (), batch_size: int = 1024
) -> tuple[int, int]:
    """(documents, text bytes) of a clean split, streamed a record batch at a time."""
    docs = size = 0
    for batch in _batches(clean_dir, split, ["text", "source"], exclude, batch_size):
        docs += batch.num_rows
        size += pc.sum(pc.binary_length(batch.column("text"))).as_py() or 0
    return docs, size


def mixture_budgets(
    split_bytes: list[int], tokenizer_weights: list[float], sample_bytes: int
) -> list[int]:
    """Each source's share of a `sample_bytes` sample (0: as many bytes as the sources hold):
    by its tokenizer weight, or where that is 0 by its share of the bytes; at least 1 byte
    (0 would mean the whole split)."""
    total = sum(split_bytes)
    own = [w if w > 0 else (b / total if total else 0.0) for w, b in zip(
        tokenizer_weights, split_bytes, strict=True)]  # fmt: skip
    norm = sum(own) or 1.0
    budget = sample_bytes if sample_bytes > 0 else total
    return [max(1, round(budget * w / norm)) for w in own]


class HashSample:
    """Iterable of the sampled texts of one split; `stats()` is complete after one iteration.

    `sample_bytes=0` takes every document, and so does a value at least the split's size; then
    the sizing pass is skipped for 0.
    """

    def __init__(
        self,
        clean_dir: ArtifactPath,
        split: str,
        sample_bytes: int,
        exclude_sources: tuple[str, ...] = (),
        batch_size: int = 1024,
    ) -> None:
        # A store input (with `glob`) stays one, so only the split's shards are fetched.
        self.clean_dir = clean_dir if hasattr(clean_dir, "glob") else Path(clean_dir)
        self.split, self.sample_bytes = split, sample_bytes
        self.exclude, self.batch_size = exclude_sources, batch_size
        self.split_docs = self.split_bytes = self.docs = self.bytes = 0

    def _size_split(self) -> None:
        self.split_docs, self.split_bytes = split_size(
            self.clean_dir, self.split, self.exclude, self.batch_size
        )

    def __iter__(self) -> Iterator[str]:
        self.split_docs = self.split_bytes = self.docs = self.bytes = 0
        if self.sample_bytes > 0:
            self._size_split()
        threshold = sample_threshold(self.sample_bytes, self.split_bytes)
        columns = ["id", "text", "source"]
        for batch in _batches(self.clean_dir, self.split, columns, self.exclude, self.batch_size):
            if threshold < HASH_RANGE:
                ids = batch.column("id").to_pylist()
                keep = [sample_hash(i) < threshold for i in ids]
                batch = batch.filter(pa.array(keep, type=pa.bool_()))
            self.docs += batch.num_rows
            self.bytes += pc.sum(pc.binary_length(batch.column("text"))).as_py() or 0
            yield from batch.column("text").to_pylist()
        if self.sample_bytes <= 0:
            self.split_docs, self.split_bytes = self.docs, self.bytes

    def stats(self) -> SampleStats:
        return SampleStats(self.split_docs, self.split_bytes, self.docs, self.bytes)
