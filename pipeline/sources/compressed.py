"""Line streams of plain and gzip/zstd-compressed files, the way JSONL dumps ship.

`.jsonl.gz`, `.jsonl.zst`, `.ndjson.zst`... are decompressed by pyarrow as they are read (no
temporary file, memory bounded by the buffer size), and split into lines exactly as a plain file
opened in binary mode would be, so line numbers (and the ids built from them) do not depend on
the compression.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
"""File suffix -> pyarrow codec name."""

BUFFER_BYTES = 1 << 20
READ_BYTES = 1 << 16
"""Decompressed bytes asked for at a time: a stream that breaks loses at most this much before
the break (pyarrow returns nothing of a read that fails)."""


def split_compression(path: str | Path) -> tuple[str, str | None]:
    """(format suffix, codec): `a.jsonl.zst` -> (".jsonl", "zstd"); `a.txt` -> (".txt", None)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        return (suffixes[-2] if len(suffixes) > 1 else ""), COMPRESSIONS[suffixes[-1]]
    return (suffixes[-1] if suffixes else ""), None


class _DecompressedStream(io.RawIOBase):
    """A pyarrow input stream as a raw binary stream, so `io.BufferedReader` can split lines."""

    def __init__(self, path: Path, codec: str) -> None:
        import pyarrow as pa

        self._stream = pa.input_stream(str(path), compression=codec, buffer_size=BUFFER_BYTES)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        data = self._stream.read(min(len(buffer), READ_BYTES))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()


def open_binary(path: Path, codec: str | None) -> BinaryIO:
    """The file's (decompressed) bytes; iterating it yields lines ending in b"\\n".

    A corrupt or truncated compressed file raises `OSError` when the bad part is reached.
    """
    if codec is None:
        return open(path, "rb")
    return io.BufferedReader(_DecompressedStream(path, codec), BUFFER_BYTES)  # type: ignore[return-value]
