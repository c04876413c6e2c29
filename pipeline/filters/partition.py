"""One partition of the `clean` stage, run as a Ray task: the filter chain, the dedup hashes,
and later the final shards once global deduplication has decided what goes.

Phase 1 (`filter_partition`) writes the surviving documents to a private part file and returns
only counts and hashes (the dedup index never holds texts). Phase 2 (`shard_partition`) drops the
duplicates found globally and writes the partition's share of the train/val shards.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmforge.pipeline.filters.base import DroppedDocument
from lmforge.pipeline.filters.chain import build_filter_chain, chain_counts, run_chain
from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator
from lmforge.pipeline.filters.document import Document
from lmforge.pipeline.filters.minhash import MinHashDeduplicator
from lmforge.pipeline.sources.config import DataConfig
from lmforge.pipeline.sources.parquet_shards import SCHEMA, split_of

PART_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("meta", pa.string())]
)
EXCLUDED_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("id", "source", "step", "reason", "snippet")]
)


@dataclass(slots=True)
class FilteredPartition:
    """What phase 1 sends back to the driver: counts and hashes, no texts."""

    index: int
    docs_in: int
    counts: dict[str, dict]
    ids: list[str]
    exact_hashes: np.ndarray
    band_keys: np.ndarray
    signatures: np.ndarray


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"part-{index:05d}.parquet"


def filter_partition(docs: list[Document], cfg: DataConfig, index: int, parts_dir: str):
    """Run the chain over `docs`; keep survivors and every exclusion on disk."""
    excluded: list[DroppedDocument] = []
    chain = build_filter_chain(cfg.filters, exclusion_sink=excluded.append)
    kept = list(run_chain(docs, chain))
    rows = [
        {
            "id": d.id,
            "text": d.text,
            "source": d.source,
            "meta": json.dumps(d.meta, sort_keys=True, default=str),
        }
        for d in kept
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=PART_SCHEMA),
        part_path(Path(parts_dir), index),
        compression="zstd",
    )
    pq.write_table(
        pa.Table.from_pylist([asdict(e) for e in excluded], schema=EXCLUDED_SCHEMA),
        Path(parts_dir) / f"excluded-{index:05d}.parquet",
        compression="zstd",
    )
    ids = [d.id for d in kept]
    texts = [d.text for d in kept]
    exact = ExactDeduplicator(cfg.dedup.exact)
    hashes = np.array([exact.text_hash(t) for t in texts], dtype=np.uint64)
    if cfg.dedup.near.enabled and texts:
        signatures, band_keys = MinHashDeduplicator(cfg.dedup.near).signatures(texts)
    else:
        signatures = np.zeros((len(texts), 0), np.uint32)
        band_keys = np.zeros((len(texts), 0), np.uint64)
    return FilteredPartition(
        index=index,
        docs_in=len(docs),
        counts={name: c.to_dict() for name, c in chain_counts(chain).items()},
        ids=ids,
        exact_hashes=hashes,
        band_keys=band_keys,
        signatures=signatures,
    )


def shard_partition(
    parts_dir: str, index: int, removed: set[str], cfg: DataConfig, out_dir: str
) -> list[dict]:
    """Write this partition's kept documents as train/val shards; returns their descriptions."""
    table = pq.read_table(part_path(Path(parts_dir), index))
    buffers: dict[str, list[dict]] = {"train": [], "val": []}
    sizes = {"train": 0, "val": 0}
    shards: list[dict] = []

    def flush(split: str) -> None:
        if not buffers[split]:
            return
        name = f"{split}-{index:05d}-{sum(s['split'] == split for s in shards):03d}.parquet"
        pq.write_table(
            pa.Table.from_pylist(buffers[split], schema=SCHEMA),
            Path(out_dir) / name,
            compression="zstd",
        )
        shards.append({"file": name, "split": split, "rows": len(buffers[split])})
        buffers[split], sizes[split] = [], 0

    for row in table.to_pylist():
        if row["id"] in removed:
            continue
        meta = json.loads(row["meta"])
        split = split_of(row["id"], cfg.val_fraction)
        buffers[split].append(
            {
                **row,
                "n_chars": len(row["text"]),
                "split": split,
                "lang": str(meta.get("language", "")),
            }
        )
        sizes[split] += len(row["text"].encode("utf-8"))
        if len(buffers[split]) >= cfg.docs_per_shard or sizes[split] >= cfg.max_shard_mb * 2**20:
            flush(split)
    flush("train")
    flush("val")
    return shards
