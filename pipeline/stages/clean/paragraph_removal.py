"""The split step's side of paragraph dedup: a read unit's documents lose the lines or paragraphs
the counting tasks found elsewhere (`pipeline/dedup/paragraph.py`); a document left too short
goes through the length filter again and is dropped with its reason.

What it leaves in the artifact, one file per read unit: the documents it dropped
(`excluded.parquet/paragraph-<unit>.parquet`, step `paragraph_dedup`) and, per unit of text it
removed, how many documents hold it and how many copies and characters went
(`paragraph_duplicates.parquet/`, read by `lmforge inspect clean --filter paragraph_dedup`).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lmforge.pipeline.dedup.index import split_node
from lmforge.pipeline.dedup.paragraph import DOCUMENTS, HASH, NODE, unit_slice
from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import SNIPPET_CHARS, DroppedDocument
from lmforge.pipeline.filters.dedup_paragraph import remove_units
from lmforge.pipeline.filters.length import LengthFilter
from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.shared_dir import SharedDir

STEP = "paragraph_dedup"
PARAGRAPH_DUPLICATES_DIR = "paragraph_duplicates.parquet"
"""Each removed unit of text with its counts, one file per read unit (a Parquet dataset)."""
PARAGRAPH_SCHEMA = pa.schema(
    [
        ("hash", pa.uint64()),
        ("unit", pa.string()),
        ("documents", pa.int64()),
        ("removed", pa.int64()),
        ("chars", pa.int64()),
    ]
)
"""`unit`: the text as it stood in the first document of the read unit that lost it (its first
`SNIPPET_CHARS`); `documents`: documents of the corpus that hold it; `removed`: copies removed
from this read unit's documents; `chars`: their characters."""


def dropped_reason(length_reason: str) -> str:
    """The reason recorded for a document the length filter drops after this step."""
    return f"{STEP}_{length_reason.removeprefix('length_')}"


class ParagraphRemoval:
    """Removes a read unit's repeated units document by document (`apply`), then writes what it
    did into the artifact (`finish`)."""

    def __init__(
        self, index: int, cfg: DataConfig, dirs: SharedDir, paragraph_files: list[str]
    ) -> None:
        self.index, self.cfg = index, cfg
        self.enabled = cfg.dedup.paragraph.enabled
        self.length = LengthFilter(cfg.filters.length) if cfg.filters.length.enabled else None
        self.cpu_seconds = 0.0
        started = time.process_time()
        self.lost: dict[int, set[int]] = {}
        """row -> hashes of the units that document loses."""
        self.documents: dict[int, int] = {}
        """unit hash -> documents of the corpus holding it."""
        for path in paragraph_files:
            found = unit_slice(dirs.fetch(path), index)
            rows = split_node(found[NODE])[1].tolist()
            hashes = found[HASH].view(np.uint64).tolist()
            for row, unit_hash, docs in zip(rows, hashes, found[DOCUMENTS].tolist(), strict=True):
                self.lost.setdefault(row, set()).add(unit_hash)
                self.documents[unit_hash] = docs
        self.stats: dict[int, list] = {}  # hash -> [first text, copies removed, characters]
        self.excluded: list[DroppedDocument] = []
        self.dropped: dict[str, int] = {}
        self.docs_touched = 0
        self.cpu_seconds += time.process_time() - started

    def apply(self, row_number: int, row: dict) -> dict | None:
        """`row` (a part-file row) with its repeated units removed, or None when what is left is
        too short (recorded as excluded)."""
        lost = self.lost.get(row_number)
        if not lost:
            return row
        started = time.process_time()
        text, removed = remove_units(row["text"], lost, self.cfg.dedup.paragraph)
        self.docs_touched += 1
        for unit in removed:
            entry = self.stats.setdefault(unit.hash, [unit.text[:SNIPPET_CHARS], 0, 0])
            entry[1] += 1
            entry[2] += len(unit.text)
        reason = self._too_short(row, text)
        self.cpu_seconds += time.process_time() - started
        if reason is not None:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            snippet = row["text"][:SNIPPET_CHARS]
            self.excluded.append(DroppedDocument(row["id"], row["source"], STEP, reason, snippet))
            return None
        return {**row, "text": text}

    def _too_short(self, row: dict, text: str) -> str | None:
        if not text.strip():
            return f"{STEP}_empty"
        if self.length is None:
            return None
        verdict = self.length.filter(Document(id=row["id"], text=text, source=row["source"]))
        return None if verdict is True else dropped_reason(verdict[1])

    def finish(self, output: ArtifactOutput, excluded_dir: str, excluded_schema: pa.Schema) -> dict:
        """Write the read unit's files (when the step is on); its counts and their entries."""
        counts = {
            "units_removed": sum(s[1] for s in self.stats.values()),
            "chars_removed": sum(s[2] for s in self.stats.values()),
            "docs_touched": self.docs_touched,
            "docs_dropped": sum(self.dropped.values()),
            "cpu_seconds": round(self.cpu_seconds, 4),
        }
        if not self.enabled:
            return {"counts": counts, "dropped": {}, "files": []}
        rows = [
            {
                "hash": h,
                "unit": s[0],
                "documents": self.documents[h],
                "removed": s[1],
                "chars": s[2],
            }
            for h, s in sorted(self.stats.items())
        ]
        excluded = [asdict(e) for e in self.excluded]
        entries = []
        for rel, schema, table in (
            (f"{PARAGRAPH_DUPLICATES_DIR}/part-{self.index:05d}.parquet", PARAGRAPH_SCHEMA, rows),
            (f"{excluded_dir}/paragraph-{self.index:05d}.parquet", excluded_schema, excluded),
        ):
            with output.open(rel) as out, pq.ParquetWriter(out, schema, compression="zstd") as w:
                w.write_table(pa.Table.from_pylist(table, schema=schema))
            entries.append(out.entry)
        return {"counts": counts, "dropped": dict(self.dropped), "files": entries}


def paragraph_files_of(directory: str | Path, tasks: int) -> list[str]:
    """The counting tasks' output files, in task order."""
    return [str(Path(directory) / f"paragraphs-{p:05d}.npy") for p in range(tasks)]


def most_repeated_units(artifact: Path, limit: int) -> list[dict]:
    """The `limit` units removed that the most documents held: {hash, unit (its text), documents,
    removed (copies over the corpus)}; summed in Arrow over the read units' files, the texts read
    back for those `limit` only."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    path = artifact / PARAGRAPH_DUPLICATES_DIR
    if not path.is_dir():
        return []
    files = ds.dataset(path, format="parquet")
    counts = files.to_table(columns=["hash", "documents", "removed"])
    if not counts.num_rows:
        return []
    top = (
        counts.group_by("hash")
        .aggregate([("documents", "max"), ("removed", "sum")])
        .sort_by(
            [("documents_max", "descending"), ("removed_sum", "descending"), ("hash", "ascending")]
        )
        .slice(0, limit)
        .to_pylist()
    )
    wanted = pa.array([t["hash"] for t in top], pa.uint64())
    texts: dict[int, str] = {}
    for batch in files.to_batches(columns=["hash", "unit"], filter=pc.field("hash").isin(wanted)):
        for found, unit in zip(batch["hash"].to_pylist(), batch["unit"].to_pylist(), strict=True):
            texts.setdefault(found, unit)
    return [
        {
            "hash": t["hash"],
            "unit": texts[t["hash"]],
            "documents": t["documents_max"],
            "removed": t["removed_sum"],
        }
        for t in top
    ]
