"""One partition of the `clean` stage, run as a Ray task: the filter chain, the dedup hashes,
and later the final shards once global deduplication has decided what goes.

Phase 1 (`filter_unit`) reads its own share of the sources (a read unit: whole files or a range
of a big one, `sources/read_plan.py`), runs the chain over it `data.partition_docs` documents at a
time, writes the survivors to a private part file and returns only counts and hashes (the dedup
index never holds texts, and no document text passes through the coordinator). Phase 2
(`shard_partition`) drops the duplicates found globally and writes the partition's share of the
train/val shards.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
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
from lmforge.pipeline.sources.files import SourceError
from lmforge.pipeline.sources.parquet_shards import SCHEMA, split_of
from lmforge.pipeline.sources.read_plan import ReadUnit, read_documents

log = logging.getLogger(__name__)

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
    skipped_files: list[str] = field(default_factory=list)
    """Sources that could not be read (data.on_error=skip)."""
    docs_before_file_errors: int = 0
    """Documents of those sources read before they broke (kept in the corpus)."""


def part_path(parts_dir: Path, index: int) -> Path:
    return parts_dir / f"part-{index:05d}.parquet"


class _UnitReader:
    """The documents of a read unit, up to `limit`; a source that breaks fails the task or, with
    data.on_error=skip, is skipped from where it breaks and counted."""

    def __init__(self, unit: ReadUnit, cfg: DataConfig, limit: int) -> None:
        self.unit, self.cfg, self.limit = unit, cfg, limit
        self.docs_in = 0
        self.skipped: list[str] = []
        self.before_errors = 0

    def __iter__(self) -> Iterator[Document]:
        for piece in self.unit.pieces:
            read = 0
            try:
                for doc in read_documents(piece, self.cfg.text_field, self.cfg.max_text_file_mb):
                    if self.limit and self.docs_in >= self.limit:
                        return
                    read += 1
                    self.docs_in += 1
                    yield doc
            except SourceError as exc:
                if self.cfg.on_error == "fail":
                    raise
                log.warning("skipping a source: %s", exc)
                self.skipped.append(piece.path)
                self.before_errors += read


def filter_unit(unit: ReadUnit, cfg: DataConfig, parts_dir: str, limit: int = 0):
    """Read `unit`, run the chain over it in batches; keep survivors and exclusions on disk."""
    excluded: list[DroppedDocument] = []
    chain = build_filter_chain(cfg.filters, exclusion_sink=excluded.append)
    exact = ExactDeduplicator(cfg.dedup.exact)
    near = MinHashDeduplicator(cfg.dedup.near) if cfg.dedup.near.enabled else None
    reader = _UnitReader(unit, cfg, limit)
    documents = iter(reader)
    ids: list[str] = []
    hashes, signatures, band_keys = [], [], []
    directory = Path(parts_dir)
    with (
        pq.ParquetWriter(part_path(directory, unit.index), PART_SCHEMA, compression="zstd") as kept,
        pq.ParquetWriter(
            directory / f"excluded-{unit.index:05d}.parquet", EXCLUDED_SCHEMA, compression="zstd"
        ) as dropped,
    ):
        while batch := list(islice(documents, cfg.partition_docs)):
            survivors = list(run_chain(batch, chain))
            rows = [
                {
                    "id": d.id,
                    "text": d.text,
                    "source": d.source,
                    "meta": json.dumps(d.meta, sort_keys=True, default=str),
                }
                for d in survivors
            ]
            kept.write_table(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
            dropped.write_table(
                pa.Table.from_pylist([asdict(e) for e in excluded], schema=EXCLUDED_SCHEMA)
            )
            excluded.clear()
            texts = [d.text for d in survivors]
            ids += [d.id for d in survivors]
            hashes.append(np.array([exact.text_hash(t) for t in texts], dtype=np.uint64))
            if near is not None and texts:
                sig, bands = near.signatures(texts)
                signatures.append(sig)
                band_keys.append(bands)
    if near is None or not signatures:
        width = (cfg.dedup.near.num_perm, cfg.dedup.near.bands) if near else (0, 0)
        signatures = [np.zeros((len(ids), width[0]), np.uint32)]
        band_keys = [np.zeros((len(ids), width[1]), np.uint64)]
    return FilteredPartition(
        index=unit.index,
        docs_in=reader.docs_in,
        counts={name: c.to_dict() for name, c in chain_counts(chain).items()},
        ids=ids,
        exact_hashes=np.concatenate(hashes) if hashes else np.zeros(0, np.uint64),
        band_keys=np.concatenate(band_keys),
        signatures=np.concatenate(signatures),
        skipped_files=reader.skipped,
        docs_before_file_errors=reader.before_errors,
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
