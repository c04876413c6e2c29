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

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.dedup.index import IndexReader, unit_index_files
from lmforge.pipeline.dedup.index_writer import UnitIndexWriter
from lmforge.pipeline.dedup.paragraph_index import ParagraphHashing
from lmforge.pipeline.dedup.resolve import KINDS, remove_list_path
from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import DroppedDocument
from lmforge.pipeline.filters.chain import build_filter_chain, chain_counts, run_chain
from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator
from lmforge.pipeline.filters.minhash import MinHashDeduplicator
from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.sources.files import SourceError
from lmforge.pipeline.sources.parquet_shards import SCHEMA, split_of
from lmforge.pipeline.sources.read_plan import ReadUnit, read_documents
from lmforge.pipeline.stages.clean.paragraph_removal import ParagraphRemoval
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.shared_dir import SharedDir

log = logging.getLogger(__name__)

PART_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("source", pa.string()), ("meta", pa.string())]
)
EXCLUDED_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("id", "source", "step", "reason", "snippet")]
)
GROUP_SHARE = 1 / 16
"""A kept file's row group holds about this share of an output shard, so shards cut at row-group
boundaries land within a few % of `data.shard_mb`."""
TEXT_TO_ZSTD = 3.0
"""About how much larger UTF-8 text is than its zstd Parquet (only sizes row groups)."""
DUPLICATES_SCHEMA = pa.schema(
    [("id", pa.string()), ("kept_id", pa.string()), ("kind", pa.string())]
)
EXCLUDED_DIR = "excluded.parquet"
"""Every document the chain dropped, one file per read unit (a Parquet dataset directory)."""
DUPLICATES_DIR = "duplicates.parquet"
"""Every removed duplicate with the id kept in its place, one file per read unit."""


class CleanDirs(SharedDir):
    """The stage's work directory, kept across an interruption so a rerun resumes from it; on
    shared storage, or shared through the bucket (`SharedDir`)."""

    def _sub(self, name: str) -> str:
        return str(Path(self.root) / name)

    @property
    def parts(self) -> str:
        """Survivors of the filter chain (one part file per read unit), then kept documents."""
        return self._sub("parts")

    @property
    def index(self) -> str:
        """Each unit's dedup index (`pipeline/dedup/index.py`)."""
        return self._sub("index")

    @property
    def removals(self) -> str:
        """Dedup steps' outputs and each unit's remove list."""
        return self._sub("removals")

    @property
    def done(self) -> str:
        """Completion markers of finished tasks (`pipeline/storage/task_markers.py`)."""
        return self._sub("done")

    def make(self) -> None:
        for name in ("parts", "index", "removals", "done"):
            Path(self._sub(name)).mkdir(parents=True, exist_ok=True)

    def filter_marker(self, unit: int) -> Path:
        return Path(self.done) / f"filter-{unit:05d}.json"

    def split_marker(self, unit: int) -> Path:
        return Path(self.done) / f"split-{unit:05d}.json"

    def shard_marker(self, name: str) -> Path:
        return Path(self.done) / f"shard-{name}.json"

    def resolve_marker(self) -> Path:
        return Path(self.done) / "resolve.json"


@dataclass(slots=True)
class FilteredPartition:
    """What phase 1 sends back to the coordinator: counts only (the dedup index is on disk)."""

    index: int
    docs_in: int
    counts: dict[str, dict]
    kept: int
    """Documents past the chain (rows of the part file and of the dedup index)."""
    skipped_files: list[str] = field(default_factory=list)
    """Sources that could not be read (data.on_error=skip)."""
    docs_before_file_errors: int = 0
    """Documents of those sources read before they broke (kept in the corpus)."""
    peak_rss_bytes: int = 0
    start_rss_bytes: int = 0
    """The task's peak resident memory."""
    node_id: str = ""
    """The Ray node that ran the task."""
    files: list[dict] = field(default_factory=list)
    """Manifest entries of the artifact files it wrote (its `excluded.parquet/` part)."""
    paragraph_units: int = 0
    """(unit hash, document) pairs of its paragraph index (`data.dedup.paragraph`)."""
    paragraph_cpu_seconds: float = 0.0
    """CPU seconds it spent cutting, normalising and hashing lines or paragraphs."""


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


def filter_unit(
    unit: ReadUnit, cfg: DataConfig, dirs: CleanDirs, output: ArtifactOutput, limit: int = 0
):
    """Read `unit`, run the chain over it in batches; keep survivors and the unit's dedup index
    in the work directory, and write its exclusions into the artifact."""
    reset_peak_rss()
    dirs.make()  # on a node that had no mirror of the work directory yet
    excluded: list[DroppedDocument] = []
    chain = build_filter_chain(cfg.filters, exclusion_sink=excluded.append)
    exact = ExactDeduplicator(cfg.dedup.exact)
    near = MinHashDeduplicator(cfg.dedup.near) if cfg.dedup.near.enabled else None
    reader = _UnitReader(unit, cfg, limit)
    documents = iter(reader)
    index = UnitIndexWriter(
        Path(dirs.index),
        unit.index,
        cfg.dedup.near.num_perm if near else None,
        cfg.dedup.near.bands if near else None,
    )
    paragraphs = ParagraphHashing(Path(dirs.index), unit.index, cfg.dedup.paragraph)
    with (
        pq.ParquetWriter(
            part_path(Path(dirs.parts), unit.index), PART_SCHEMA, compression="zstd"
        ) as kept,
        output.open(f"{EXCLUDED_DIR}/part-{unit.index:05d}.parquet") as excluded_file,
        pq.ParquetWriter(excluded_file, EXCLUDED_SCHEMA, compression="zstd") as dropped,
    ):
        while batch := list(islice(documents, cfg.partition_docs)):
            survivors = list(run_chain(batch, chain, batch_size=len(batch)))
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
            hashes = np.array([exact.text_hash(t) for t in texts], dtype=np.uint64)
            sig, bands = near.signatures(texts) if near is not None and texts else (None, None)
            paragraphs.add(index.rows, texts)
            index.add([d.id for d in survivors], hashes, sig, bands)
    index.close()
    paragraphs.close()
    dirs.publish(part_path(Path(dirs.parts), unit.index))
    dirs.publish(*unit_index_files(Path(dirs.index), unit.index))
    result = FilteredPartition(
        index=unit.index,
        docs_in=reader.docs_in,
        counts={name: c.to_dict() for name, c in chain_counts(chain).items()},
        kept=index.rows,
        skipped_files=reader.skipped,
        docs_before_file_errors=reader.before_errors,
        **task_rss_stats(),
        node_id=_node_id(),
        files=[excluded_file.entry],
        paragraph_units=paragraphs.pairs,
        paragraph_cpu_seconds=round(paragraphs.cpu_seconds, 4),
    )
    dirs.mark_done(dirs.filter_marker(unit.index), asdict(result))
    return result


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


def kept_path(parts_dir: str | Path, index: int, split: str) -> Path:
    return Path(parts_dir) / f"kept-{index:05d}-{split}.parquet"


def split_unit(
    index: int,
    cfg: DataConfig,
    dirs: CleanDirs,
    output: ArtifactOutput,
    paragraph_files: list[str] = (),
) -> dict:
    """Drop this unit's duplicates (recorded with the id kept in their place), take the repeated
    lines or paragraphs out of the others (`paragraph_files`: the counting tasks' outputs), and
    write its kept documents, train and val apart, in row groups small enough for `plan_shards`
    to cut output shards near `data.shard_mb`; returns the removals by kind and each split's row
    groups as (rows, compressed bytes)."""
    reset_peak_rss()
    dirs.make()
    removed = _removed_rows(index, dirs)
    paragraphs = ParagraphRemoval(index, cfg, dirs, list(paragraph_files))
    group_bytes = max(1, int(cfg.shard_mb * 2**20 * GROUP_SHARE * TEXT_TO_ZSTD))
    writers = {
        split: pq.ParquetWriter(kept_path(dirs.parts, index, split), SCHEMA, compression="zstd")
        for split in ("train", "val")
    }
    buffers: dict[str, list[dict]] = {"train": [], "val": []}
    sizes = {"train": 0, "val": 0}
    duplicates: list[dict] = []
    row_number = 0

    def flush(split: str) -> None:
        if buffers[split]:
            writers[split].write_table(
                pa.Table.from_pylist(buffers[split], schema=SCHEMA), row_group_size=1 << 30
            )
        buffers[split], sizes[split] = [], 0

    by_kind = dict.fromkeys(KINDS.values(), 0)

    def write_duplicates(writer: pq.ParquetWriter) -> None:
        if duplicates:
            writer.write_table(pa.Table.from_pylist(duplicates, schema=DUPLICATES_SCHEMA))
            for d in duplicates:
                by_kind[d["kind"]] += 1
            duplicates.clear()

    part = pq.ParquetFile(dirs.fetch(part_path(Path(dirs.parts), index)))
    with (
        output.open(f"{DUPLICATES_DIR}/part-{index:05d}.parquet") as duplicates_file,
        pq.ParquetWriter(duplicates_file, DUPLICATES_SCHEMA, compression="zstd") as dup_writer,
    ):
        for batch in part.iter_batches(batch_size=cfg.partition_docs):
            for row in batch.to_pylist():
                number, row_number = row_number, row_number + 1
                if number in removed:
                    kind, kept_id = removed[number]
                    duplicates.append({"id": row["id"], "kept_id": kept_id, "kind": kind})
                    continue
                if (row := paragraphs.apply(number, row)) is None:
                    continue
                split = split_of(row["id"], cfg.val_fraction)
                meta = json.loads(row["meta"])
                buffers[split].append(
                    {
                        **row,
                        "n_chars": len(row["text"]),
                        "split": split,
                        "lang": str(meta.get("language", "")),
                    }
                )
                sizes[split] += len(row["text"].encode("utf-8", errors="surrogateescape"))
                if sizes[split] >= group_bytes:
                    flush(split)
            write_duplicates(dup_writer)  # a batch's duplicates at a time, not the unit's
        write_duplicates(dup_writer)
        groups = {}
        for split, writer in writers.items():
            flush(split)
            writer.close()
            meta = pq.read_metadata(kept_path(dirs.parts, index, split))
            groups[split] = [
                (meta.row_group(g).num_rows, _compressed_bytes(meta.row_group(g)))
                for g in range(meta.num_row_groups)
            ]
        dirs.publish(*(kept_path(dirs.parts, index, split) for split in writers))
    paragraph = paragraphs.finish(output, EXCLUDED_DIR, EXCLUDED_SCHEMA)
    result = {
        "removed": {**by_kind, **paragraph["dropped"]},
        "groups": groups,
        "paragraph": paragraph["counts"],
        **task_rss_stats(),
        "files": [duplicates_file.entry, *paragraph["files"]],
    }
    dirs.mark_done(dirs.split_marker(index), result)
    return result


def _removed_rows(index: int, dirs: CleanDirs) -> dict[int, tuple[str, str]]:
    """row -> (kind, kept id) of this unit's removed duplicates."""
    removal_file = remove_list_path(Path(dirs.removals), index)
    if not dirs.exists(removal_file):
        return {}
    rows, kinds, kept_nodes = dirs.load_array(removal_file)
    kept_ids = IndexReader(dirs.index, dirs.fetch).ids(kept_nodes)
    return {
        int(r): (KINDS[int(k)], i.decode("utf-8", errors="surrogateescape"))
        for r, k, i in zip(rows, kinds, kept_ids, strict=True)
    }


def _compressed_bytes(group) -> int:
    return sum(group.column(c).total_compressed_size for c in range(group.num_columns))
