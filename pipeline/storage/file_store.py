"""The one storage interface: directories of checksummed files published atomically, under a
root that is a local directory (`LocalFiles`) or a bucket (`BucketFiles`).

Artifacts and checkpoints are both such directories, told apart only by their marker, the file
written last that lists every other one with its size and checksum:

    <store>/<stage>/<key>/manifest.json     an artifact (`artifact_store`, `bucket_artifact_store`)
    <checkpoints>/step_000123/COMPLETE      a checkpoint (`training/checkpoint/store`)

A reader sees a directory only once its marker is there. Locally the directory is written under
a hidden temporary name and `publish` renames it into place; in a bucket, where nothing renames,
the marker's upload is the publication and `publish` does nothing (`renames` says which). Paths
are relative POSIX paths under the root; `open_files` picks the implementation by the one rule of
`location.is_bucket`. Bytes move between the local disk and either kind through `upload` and
`download` (`transfers.copy_stream`: hashed and counted on the way).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Protocol

from lmforge.durable import AtomicFile
from lmforge.pipeline.storage.bucket_files import BucketFiles
from lmforge.pipeline.storage.local_files import LocalFiles
from lmforge.pipeline.storage.location import is_bucket
from lmforge.pipeline.storage.transfers import Hasher, TransferProgress, copy_stream


class FileSink(Protocol):
    """A file being written: whole once committed, gone after `abort` (or an exception in
    `with`)."""

    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...
    def commit(self) -> None: ...
    def abort(self) -> None: ...
    def __enter__(self) -> FileSink: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class FileStore(Protocol):
    """Files under one root, local or in a bucket, in directories published atomically."""

    root: str
    """The root's path or URI."""
    renames: bool
    """True: `publish` renames a directory into place; False: its marker, written last,
    published it."""

    def uri(self, rel: str = "") -> str:
        """The path or URI of `rel`, as messages name it."""
        ...

    def local_path(self, rel: str = "") -> Path | None:
        """Where `rel` can be read and written in place on this node; None in a bucket."""
        ...

    def read_bytes(self, rel: str) -> bytes | None:
        """The content of the file `rel`; None when there is none."""
        ...

    def write_bytes(self, rel: str, data: bytes) -> None:
        """The whole file `rel`, written atomically."""
        ...

    def open_write(self, rel: str) -> FileSink:
        """`rel` to write from a stream, whole once committed."""
        ...

    def open_read(self, rel: str) -> BinaryIO:
        """`rel` to read from its start (close it when done)."""
        ...

    def size(self, rel: str) -> int | None:
        """Bytes of the file `rel`; None when there is none."""
        ...

    def sizes(self, rel: str = "", *, recursive: bool = False) -> dict[str, int]:
        """Bytes of every file under the directory `rel`, by path relative to it (one listing)."""
        ...

    def delete_file(self, rel: str) -> None:
        """Remove the file `rel` if it is there."""
        ...

    def delete_dir(self, rel: str) -> None:
        """Remove the directory `rel` and everything under it."""
        ...

    def publish(self, pending: str, final: str, set_aside: str | None = None) -> None:
        """Make the complete directory `pending` visible as `final` (see the module doc)."""
        ...


def open_files(location: str | os.PathLike[str]) -> FileStore:
    """The files under `location`: a bucket URI, or a local path (`file://` included)."""
    if is_bucket(location):
        return BucketFiles(os.fspath(location))
    return LocalFiles(location)


def upload(
    files: FileStore,
    source: str | os.PathLike[str],
    rel: str,
    progress: TransferProgress | None = None,
    digest: Hasher | None = None,
) -> int:
    """Copy the local file `source` in as `rel` (whole or not at all); the bytes copied."""
    with open(source, "rb") as src, files.open_write(rel) as out:
        return copy_stream(src, out, progress, digest)


def download(
    files: FileStore,
    rel: str,
    target: str | os.PathLike[str],
    progress: TransferProgress | None = None,
    digest: Hasher | None = None,
) -> int:
    """Copy `rel` out to the local file `target` (whole or not at all); the bytes copied."""
    with files.open_read(rel) as src, AtomicFile(target) as out:
        return copy_stream(src, out, progress, digest)
