"""How `clean` splits its sources into read units, so that tasks read and the coordinator plans.

The coordinator only lists files, reads their sizes and Parquet footers, and cuts the corpus into
units of about `data.read_split_mb` bytes to read (a compressed file counts as
`COMPRESSED_TEXT_RATIO` times its size):

- a plain JSONL file bigger than that is cut into byte ranges (a line belongs to the range that
  holds its first byte), each its own unit; the first line number of each range (for the
  `<file>#<line>` ids) comes from tasks that count the line starts of the ranges before it;
- a Parquet file is cut into runs of row groups of about that size (a row group is never split);
- compressed JSONL (a stream has no random access), plain text, a `datasets` dataset and the
  embedded corpus are read whole;
- small files are packed together into one unit, in order, up to the split size.

The documents of the units, read in unit order, are exactly those of reading the sources one after
another, with the same ids.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from lmforge.pipeline.document import Document
from lmforge.pipeline.sources.compressed import split_compression
from lmforge.pipeline.sources.embedded import SOURCE as EMBEDDED
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.sources.files import (
    HF_PREFIX,
    JSON_SUFFIXES,
    PARQUET_SUFFIXES,
    SourceError,
    expand_paths,
    read_piece,
)

COUNT_CHUNK = 8 << 20
"""Bytes read at a time when counting line starts."""
COMPRESSED_TEXT_RATIO = 4
"""About how many bytes of JSONL a byte of gzip/zstd holds: a compressed file is packed with
others as if this much bigger, so a task's work does not depend on the compression."""


@dataclass(frozen=True, slots=True)
class Piece:
    """A whole source, a byte range of a plain JSONL file or a row-group range of a Parquet file."""

    path: str
    start: int = 0
    end: int = -1
    """Exclusive; -1 = to the end of the source."""
    first_number: int = 1
    """Line (JSONL) or row (Parquet) number of the piece's first document, for its id."""
    size: int = 0
    """Bytes to read (on disk; decompressed, estimated, for a compressed file), for packing."""

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end < 0


@dataclass(frozen=True, slots=True)
class ReadUnit:
    """What one task reads: pieces in corpus order."""

    index: int
    pieces: tuple[Piece, ...]


def plan_reads(paths: list[str], split_bytes: int) -> list[ReadUnit]:
    """The corpus cut into units (JSONL ranges still numbered from 1: see `number_lines`)."""
    if not paths:
        return [ReadUnit(0, (Piece(EMBEDDED),))]
    pieces: list[Piece] = []
    for path in expand_paths(paths):
        pieces.extend(_pieces_of(path, split_bytes))
    units: list[ReadUnit] = []
    batch: list[Piece] = []
    batch_bytes = 0
    for piece in pieces:
        if batch and (not piece.whole or batch_bytes + piece.size > split_bytes):
            units.append(ReadUnit(len(units), tuple(batch)))
            batch, batch_bytes = [], 0
        batch.append(piece)
        batch_bytes += piece.size
        if not piece.whole:  # a part of a big file is a unit of its own
            units.append(ReadUnit(len(units), tuple(batch)))
            batch, batch_bytes = [], 0
    if batch:
        units.append(ReadUnit(len(units), tuple(batch)))
    return units


def _pieces_of(path: str, split_bytes: int) -> list[Piece]:
    if path.startswith(HF_PREFIX):
        return [Piece(path, size=split_bytes)]  # a unit of its own
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    suffix, codec = split_compression(path)
    if codec is not None:
        return [Piece(path, size=size * COMPRESSED_TEXT_RATIO)]
    if suffix in JSON_SUFFIXES and size > split_bytes:
        return [
            Piece(path, start, min(start + split_bytes, size), size=split_bytes)
            for start in range(0, size, split_bytes)
        ]
    if suffix in PARQUET_SUFFIXES and size > split_bytes:
        return _row_group_pieces(path, split_bytes) or [Piece(path, size=size)]
    return [Piece(path, size=size)]


def _row_group_pieces(path: str, split_bytes: int) -> list[Piece]:
    """Runs of row groups of about `split_bytes` compressed bytes (from the footer only)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError):
        return []  # the reading task names the corrupt file
    pieces: list[Piece] = []
    first, first_row, run_bytes, row = 0, 1, 0, 1
    for group in range(meta.num_row_groups):
        rg = meta.row_group(group)
        size = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        if group > first and run_bytes + size > split_bytes:
            pieces.append(Piece(path, first, group, first_row, run_bytes))
            first, first_row, run_bytes = group, row, 0
        run_bytes += size
        row += rg.num_rows
    pieces.append(Piece(path, first, meta.num_row_groups, first_row, run_bytes))
    return pieces if len(pieces) > 1 else []


def count_line_starts(path: str, start: int, end: int) -> int:
    """Lines of a plain file whose first byte lies in [start, end)."""
    count = 1 if start == 0 and end > 0 else 0
    # A line starts after every newline at positions [start - 1, end - 1).
    position, stop = max(start - 1, 0), end - 1
    with open(path, "rb") as handle:
        handle.seek(position)
        while position < stop:
            chunk = handle.read(min(COUNT_CHUNK, stop - position))
            if not chunk:
                break
            count += chunk.count(b"\n")
            position += len(chunk)
    return count


def number_lines(units: list[ReadUnit], counts: dict[tuple[str, int], int]) -> list[ReadUnit]:
    """Units whose JSONL byte ranges carry their first line number, from each range's count of
    line starts (`counts[(path, start)]`)."""
    next_line: dict[str, int] = {}
    numbered = []
    for unit in units:
        pieces = []
        for piece in unit.pieces:
            if (piece.path, piece.start) in counts and not piece.whole:
                first = next_line.get(piece.path, 1)
                next_line[piece.path] = first + counts[(piece.path, piece.start)]
                piece = Piece(piece.path, piece.start, piece.end, first, piece.size)
            pieces.append(piece)
        numbered.append(ReadUnit(unit.index, tuple(pieces)))
    return numbered


def ranges_to_count(units: list[ReadUnit]) -> list[Piece]:
    """The JSONL byte ranges whose line starts must be counted to number the ranges after them."""
    return [
        p
        for u in units
        for p in u.pieces
        if not p.whole and split_compression(p.path)[0] in JSON_SUFFIXES
    ]


def read_documents(piece: Piece, text_field: str, max_text_mb: float) -> Iterator[Document]:
    """The documents of one piece, with the ids a whole read of its source gives them."""
    if piece.path == EMBEDDED:
        yield from embedded_documents()
        return
    yield from read_piece(
        piece.path,
        start=piece.start,
        end=piece.end,
        first_number=piece.first_number,
        text_field=text_field,
        max_text_mb=max_text_mb,
    )
