"""Reading documents from the user's files: text, JSONL/JSON, Parquet, `datasets` datasets.

Everything streams (a corpus never has to fit in memory): JSONL also when gzip- or
zstd-compressed (`.jsonl.gz`, `.jsonl.zst`, `.json.gz`, `.ndjson.zst`...). A plain-text file is
one document and is read whole, so it has a size limit (`max_text_mb`). Every document gets a
stable id (`<file>#<line or row>` unless the record has its own id; a compressed file's line
numbers are those of its decompressed text), its source and its metadata. A file that cannot be
read raises `SourceError` naming the file and the cause; a file that breaks part-way (a bad line,
a truncated or corrupt compressed stream) raises it where it breaks, after the documents before.

A big plain JSONL file is read in byte ranges and a Parquet file in row-group ranges by different
tasks (`read_plan.py`); `read_piece` reads one such range and gives its documents the ids a whole
read would (a line belongs to the range holding its first byte).
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator
from pathlib import Path

from lmforge.pipeline.document import Document
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.sources.compressed import COMPRESSIONS, open_binary, split_compression

TEXT_SUFFIXES = {".txt", ".md", ".text"}
JSON_SUFFIXES = {".jsonl", ".json", ".ndjson"}
PARQUET_SUFFIXES = {".parquet"}
HF_PREFIX = "hf:"
MAX_TEXT_MB = 64.0
"""Default size limit of a plain-text file (one document, read whole)."""


class SourceError(LmforgeError):
    """A source file is missing, unreadable or corrupt."""


def expand_paths(patterns: list[str]) -> list[str]:
    """Globs expanded and sorted; `hf:` dataset references kept as they are."""
    found: list[str] = []
    for pattern in patterns:
        if pattern.startswith(HF_PREFIX):
            found.append(pattern)
            continue
        matches = sorted(glob.glob(str(Path(pattern).expanduser()), recursive=True))
        if not matches:
            raise _matches_nothing(pattern)
        for match in matches:
            path = Path(match)
            if path.is_dir():
                found.extend(str(p) for p in sorted(path.rglob("*")) if p.is_file())
            else:
                found.append(str(path))
    return found


def check_paths_match(patterns: list[str]) -> None:
    """Raise `expand_paths`'s error for the first pattern that matches no file, from its first
    match alone (no directory is listed): a run on a local runtime checks its paths before
    starting anything, so a mistyped path is an error in seconds, not after Ray has started."""
    for pattern in patterns:
        if pattern.startswith(HF_PREFIX):
            continue
        if next(glob.iglob(str(Path(pattern).expanduser()), recursive=True), None) is None:
            raise _matches_nothing(pattern)


def _matches_nothing(pattern: str) -> SourceError:
    return SourceError(f"data path {pattern!r} matches no file; check data.paths")


def read_source(
    path: str, text_field: str = "text", max_text_mb: float = MAX_TEXT_MB
) -> Iterator[Document]:
    """The documents of one file or `hf:` dataset."""
    if path.startswith(HF_PREFIX):
        yield from _read_hf(path[len(HF_PREFIX) :], text_field)
        return
    suffix, codec = split_compression(path)
    if suffix in JSON_SUFFIXES:
        yield from _read_jsonl(Path(path), text_field, codec)
    elif codec is not None:
        raise SourceError(
            f"{path}: compressed files are read as JSONL only ("
            + ", ".join(f"*{j}{c}" for j in sorted(JSON_SUFFIXES) for c in sorted(COMPRESSIONS))
            + "); decompress it or convert it to JSONL"
        )
    elif suffix in PARQUET_SUFFIXES:
        yield from _read_parquet(Path(path), text_field)
    else:
        yield from _read_text(Path(path), max_text_mb)


def read_piece(
    path: str,
    *,
    start: int = 0,
    end: int = -1,
    first_number: int = 1,
    text_field: str = "text",
    max_text_mb: float = MAX_TEXT_MB,
) -> Iterator[Document]:
    """The documents of part of a source: the lines starting in bytes [start, end) of a plain
    JSONL file, or row groups [start, end) of a Parquet file (end -1: to the end), numbered from
    `first_number`; any other source is read whole."""
    if start == 0 and end < 0:
        yield from read_source(path, text_field, max_text_mb)
        return
    suffix, codec = split_compression(path)
    if suffix in JSON_SUFFIXES and codec is None:
        yield from _read_jsonl(Path(path), text_field, None, start, end, first_number)
    elif suffix in PARQUET_SUFFIXES:
        yield from _read_parquet(Path(path), text_field, range(start, end), first_number)
    else:
        raise ValueError(f"{path}: only plain JSONL and Parquet files are read in parts")


def _read_text(path: Path, max_mb: float) -> Iterator[Document]:
    """A text file is one document; undecodable bytes go to the normaliser as bytes."""
    try:
        size = path.stat().st_size
        if size > max_mb * 1e6:
            raise SourceError(
                f"{path} is {size / 1e6:.1f} MB, over data.max_text_file_mb={max_mb:g} for a "
                "text file (one document, read whole); split it into JSONL documents, raise "
                "the limit or set data.on_error=skip"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise SourceError(f"{path} is empty; remove it from data.paths or set data.on_error=skip")
    if b"\x00" in raw[:8192]:
        raise SourceError(f"{path} looks binary (NUL bytes), not text; remove it from data.paths")
    try:
        text: str | bytes = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw
    yield Document(id=str(path), text=text, source=str(path), meta={})  # type: ignore[arg-type]


def _read_jsonl(
    path: Path,
    text_field: str,
    codec: str | None,
    start: int = 0,
    end: int = -1,
    first_number: int = 1,
) -> Iterator[Document]:
    if not path.is_file():
        raise SourceError(f"cannot read {path}: no such file")
    try:
        handle = open_binary(path, codec)
        if start > 0:  # the line holding byte start - 1 belongs to the range before
            handle.seek(start - 1)
            handle.readline()
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    lines = _lines_before(handle, end - handle.tell()) if end >= 0 else handle
    with handle:
        for number, line in _numbered_lines(lines, path, codec, first_number):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8", errors="surrogateescape"))
            except json.JSONDecodeError as exc:
                raise SourceError(f"{path}:{number}: not valid JSON ({exc})") from exc
            if not isinstance(record, dict) or text_field not in record:
                raise SourceError(f"{path}:{number}: no {text_field!r} field; set data.text_field")
            meta = {k: v for k, v in record.items() if k not in (text_field, "id")}
            doc_id = str(record.get("id", f"{path}#{number}"))
            yield Document(
                id=doc_id, text=_undecoded(str(record[text_field])), source=str(path), meta=meta
            )


def _lines_before(handle, budget: int) -> Iterator[bytes]:
    """The lines of `handle` that start within the next `budget` bytes."""
    while budget > 0:
        line = handle.readline()
        if not line:
            return
        budget -= len(line)
        yield line


def _numbered_lines(
    handle: Iterator[bytes], path: Path, codec: str | None, first_number: int = 1
) -> Iterator[tuple[int, bytes]]:
    """(line number, line); a stream that breaks is named with the line where it broke."""
    number = first_number - 1
    try:
        for number, line in enumerate(handle, start=first_number):
            yield number, line
    except OSError as exc:
        what = f"corrupt or truncated {codec} file" if codec else "read error"
        raise SourceError(
            f"{path}: {what}, broken at line {number + 1} ({exc}); replace the file or set "
            "data.on_error=skip"
        ) from exc


def _undecoded(text: str) -> str | bytes:
    """Text with bytes that were not UTF-8 goes back to bytes, for the normaliser to repair."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogateescape")


def _read_parquet(
    path: Path, text_field: str, row_groups: range | None = None, first_row: int = 1
) -> Iterator[Document]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        if text_field not in parquet.schema_arrow.names:
            raise SourceError(f"{path}: no column {text_field!r}; set data.text_field")
        if row_groups is not None and row_groups.stop < 0:
            row_groups = range(row_groups.start, parquet.num_row_groups)
        row = first_row - 1
        for batch in parquet.iter_batches(batch_size=1024, row_groups=row_groups):
            for record in batch.to_pylist():
                row += 1
                meta = {k: v for k, v in record.items() if k not in (text_field, "id")}
                doc_id = str(record.get("id") or f"{path}#{row}")
                yield Document(
                    id=doc_id, text=str(record[text_field] or ""), source=str(path), meta=meta
                )
    except (pa.ArrowInvalid, OSError) as exc:
        raise SourceError(f"{path}: corrupt or unreadable Parquet file ({exc})") from exc


def _read_hf(reference: str, text_field: str) -> Iterator[Document]:
    """`hf:PATH_OR_NAME[:SPLIT]` through `datasets` (a local path, or the local HF cache)."""
    import datasets

    name, _, split = reference.partition(":")
    try:
        if Path(name).is_dir() and (Path(name) / "dataset_info.json").exists():
            dataset = datasets.load_from_disk(name)
            if isinstance(dataset, datasets.DatasetDict):
                dataset = dataset[split or "train"]
        else:
            dataset = datasets.load_dataset(name, split=split or "train", streaming=True)
    except Exception as exc:  # datasets raises many types; name the dataset and the cause
        raise SourceError(
            f"cannot open dataset {reference!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for row, record in enumerate(dataset):
        if text_field not in record:
            raise SourceError(
                f"dataset {reference!r} has no {text_field!r} field; set data.text_field"
            )
        meta = {k: v for k, v in record.items() if k not in (text_field, "id")}
        doc_id = str(record.get("id") or f"{name}#{row}")
        yield Document(id=doc_id, text=str(record[text_field]), source=f"hf:{name}", meta=meta)
