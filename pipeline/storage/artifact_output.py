"""Writing a stage's artifact from any task on any node, straight into the store.

A stage hands `ctx.output` (an `ArtifactOutput`, small and picklable) to its Ray tasks. A task
writes each file through `open(rel)` (or copies a local file in with `put`) and gets back the
file's manifest entry (size, sha256, per-block sha256: `file_records`), computed from the bytes
as they were written; it returns those entries to the stage, which passes them to
`ctx.add_files`. The commit writes the manifest from them without reading the data again.

Where the bytes go: with a local store, the artifact's temporary directory (on the shared store
path; a file appears under its name only once whole); with a bucket, the artifact's data prefix
for this attempt (`<stage>/<key>/<attempt>/`), uploaded in parts of a multipart upload while it is
written. Either way nothing is visible as an artifact until the manifest is published.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lmforge.durable import AtomicFile
from lmforge.pipeline.storage.bucket_fs import filesystem
from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES, FileDigest
from lmforge.pipeline.storage.location import is_bucket
from lmforge.pipeline.storage.transfers import TransferProgress

COPY_CHUNK = 8 << 20


def check_relative(rel: str) -> str:
    """`rel` if it is a clean relative POSIX path inside an artifact, else ValueError."""
    parts = rel.split("/")
    if not rel or PurePosixPath(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"artifact file name {rel!r} must be a relative path inside the artifact")
    return rel


@dataclass(frozen=True, slots=True)
class ArtifactOutput:
    """Where the files of one artifact being made are written (a directory or a URI prefix)."""

    root: str
    block_bytes: int = DEFAULT_BLOCK_BYTES

    def location(self, rel: str) -> str:
        return f"{self.root.rstrip('/')}/{check_relative(rel)}"

    def open(self, rel: str) -> OutputFile:
        """A binary file to write `rel` into; use as a context manager. After a clean exit its
        `entry` is the manifest entry; on an exception nothing of it remains."""
        if is_bucket(self.root):
            fs, path = filesystem(self.location(rel))
            return OutputFile(rel, self.block_bytes, _BucketObject(fs, path))
        return OutputFile(rel, self.block_bytes, _LocalFile(Path(self.location(rel))))

    def holds(self, entry: dict[str, Any]) -> bool:
        """Whether the file of an entry written earlier (by an interrupted run) is still there
        with its size: a resumed stage trusts a finished task only if it is."""
        where = self.location(entry["path"])
        if not is_bucket(self.root):
            return Path(where).is_file() and Path(where).stat().st_size == entry["bytes"]
        fs, path = filesystem(where)
        info = fs.get_file_info(path)
        return info.is_file and info.size == entry["bytes"]

    def put(
        self, source: str | Path, rel: str, progress: TransferProgress | None = None
    ) -> dict[str, Any]:
        """Copy a local file in as `rel` (read once, hashed on the way); its manifest entry.
        Counted in `progress` (a transfer of several files), else logged if large."""
        own = progress is None
        if own:
            progress = TransferProgress(f"writing {self.location(rel)}", os.path.getsize(source))
        with open(source, "rb") as src, self.open(rel) as out:
            while block := src.read(COPY_CHUNK):
                out.write(block)
                progress.add(len(block))
        if own:
            progress.finish()
        return out.entry


class _LocalFile(AtomicFile):
    """A file under a hidden partial name, renamed into place once whole and on disk."""

    def __init__(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(target)

    def finish(self) -> None:
        self.commit()


class _BucketObject:
    """An object written through pyarrow's S3 output stream: a multipart upload whose parts go
    up in the background while later bytes are written; the object exists once it is closed."""

    def __init__(self, fs, path: str) -> None:
        self.fs, self.path = fs, path
        self.stream = fs.open_output_stream(path)

    def write(self, data) -> None:
        self.stream.write(data)

    def finish(self) -> None:
        self.stream.close()

    def abort(self) -> None:
        try:
            self.stream.close()  # pyarrow cannot abandon an upload: finish it, then delete it
        finally:
            with contextlib.suppress(OSError):  # else: unreferenced, the attempt's garbage
                self.fs.delete_file(self.path)


class OutputFile(io.RawIOBase):
    """A write-only binary file that hashes what passes through it (`FileDigest`)."""

    def __init__(self, rel: str, block_bytes: int, sink: _LocalFile | _BucketObject) -> None:
        super().__init__()
        self.rel = check_relative(rel)
        self.digest = FileDigest(block_bytes)
        self.sink = sink
        self.entry: dict[str, Any] | None = None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.closed:
            raise ValueError(f"{self.rel} is already closed")
        view = memoryview(data).cast("B")
        self.digest.update(view)
        self.sink.write(view)
        return len(view)

    def tell(self) -> int:
        return self.digest.size

    def close(self) -> None:
        if not self.closed:
            self.sink.finish()
            self.entry = self.digest.entry(self.rel)
        super().close()

    def abort(self) -> None:
        if not self.closed:
            self.sink.abort()
        super().close()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def copy_tree_in(output: ArtifactOutput, source: Path, prefix: str = "") -> list[dict[str, Any]]:
    """`put` every file under `source` as `prefix/<its relative path>`; their entries."""
    entries = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source).as_posix()
        entries.append(output.put(path, f"{prefix}/{rel}" if prefix else rel))
    return entries
