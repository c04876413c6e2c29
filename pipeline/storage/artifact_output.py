"""Writing a stage's artifact from any task on any node, straight into the store.

A stage hands `ctx.output` (an `ArtifactOutput`, small and picklable) to its Ray tasks. A task
writes each file through `open(rel)` (or copies a local file in with `put`) and gets back the
file's manifest entry (size, sha256, per-block sha256: `file_entries`), computed from the bytes
as they were written; it returns those entries to the stage, which passes them to
`ctx.add_files`. The commit writes the manifest from them without reading the data again.

Where the bytes go: with a local store, the artifact's temporary directory (on the shared store
path; a file appears under its name only once whole); with a bucket, the artifact's data prefix
for this attempt (`<stage>/<key>/<attempt>/`), uploaded in parts of a multipart upload while it is
written. Either way nothing is visible as an artifact until the manifest is published.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES, FileDigest
from lmforge.pipeline.storage.file_store import FileSink, FileStore, open_files
from lmforge.pipeline.storage.transfers import TransferProgress, copy_stream


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

    def files(self) -> FileStore:
        """The store of the files under `root` (opened where the writer runs)."""
        return open_files(self.root)

    def open(self, rel: str) -> OutputFile:
        """A binary file to write `rel` into; use as a context manager. After a clean exit its
        `entry` is the manifest entry; on an exception nothing of it remains."""
        return OutputFile(rel, self.block_bytes, self.files().open_write(check_relative(rel)))

    def holds(self, entry: dict[str, Any]) -> bool:
        """Whether the file of an entry written earlier (by an interrupted run) is still there
        with its size: a resumed stage trusts a finished task only if it is."""
        return self.files().size(check_relative(entry["path"])) == entry["bytes"]

    def put(
        self, source: str | Path, rel: str, progress: TransferProgress | None = None
    ) -> dict[str, Any]:
        """Copy a local file in as `rel` (read once, hashed on the way); its manifest entry.
        Counted in `progress` (a transfer of several files), else logged if large."""
        counted = progress or TransferProgress(
            f"writing {self.location(rel)}", os.path.getsize(source)
        )
        with open(source, "rb") as src, self.open(rel) as out:
            copy_stream(src, out, counted)
        if progress is None:
            counted.finish()
        assert out.entry is not None  # set by the clean exit
        return out.entry


class OutputFile(io.RawIOBase):
    """A write-only binary file that hashes what passes through it (`FileDigest`)."""

    def __init__(self, rel: str, block_bytes: int, sink: FileSink) -> None:
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
            self.sink.commit()
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
