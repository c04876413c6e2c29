"""Cleaned documents as zstd Parquet shards, and reading them back as a stream."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from lmforge.pipeline.document import Document

if TYPE_CHECKING:
    from lmforge.pipeline.storage.input_artifact import ArtifactPath

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("text", pa.string()),
        ("source", pa.string()),
        ("meta", pa.string()),
        ("n_chars", pa.int64()),
        ("lang", pa.string()),
        ("split", pa.string()),
    ]
)


def split_of(doc_id: str, val_fraction: float) -> str:
    """Deterministic train/val assignment by hash of the document id."""
    bucket = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")
    return "val" if bucket / 2**64 < val_fraction else "train"


class ShardWriter:
    """Writes `<split>-NNNNN.parquet` files of at most `docs_per_shard` rows each."""

    def __init__(self, out_dir: Path, split: str, docs_per_shard: int) -> None:
        self.out_dir, self.split, self.docs_per_shard = out_dir, split, docs_per_shard
        self.rows: list[dict] = []
        self.shards: list[dict] = []

    def add(self, doc: Document) -> None:
        self.rows.append(
            {
                "id": doc.id,
                "text": doc.text,
                "source": doc.source,
                "meta": json.dumps(doc.meta, sort_keys=True, default=str),
                "n_chars": len(doc.text),
                "lang": str(doc.meta.get("lang", "")),
                "split": self.split,
            }
        )
        if len(self.rows) >= self.docs_per_shard:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        name = f"{self.split}-{len(self.shards):05d}.parquet"
        table = pa.Table.from_pylist(self.rows, schema=SCHEMA)
        pq.write_table(table, self.out_dir / name, compression="zstd")
        self.shards.append({"file": name, "rows": len(self.rows)})
        self.rows = []

    def close(self) -> list[dict]:
        self.flush()
        return self.shards


def shard_paths(clean_dir: ArtifactPath, split: str) -> list[ArtifactPath]:
    return sorted(clean_dir.glob(f"{split}-*.parquet"), key=lambda path: path.name)


def iter_texts(
    clean_dir: ArtifactPath,
    split: str,
    batch_size: int = 1024,
    exclude_sources: tuple[str, ...] = (),
) -> Iterator[str]:
    """Stream the texts of one split, shard by shard, batch by batch."""
    for path in shard_paths(clean_dir, split):
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=batch_size, columns=["text", "source"]):
            texts, sources = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            yield from (t for t, s in zip(texts, sources, strict=True) if s not in exclude_sources)
