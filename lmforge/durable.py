"""Files that survive a crash: written whole under a temporary name, or not at all.

`AtomicFile(path)` writes `.<name>.partial-<id>` in the directory of `path`; `commit()` flushes
and fsyncs it, renames it to `path` and fsyncs the directory, so after a crash at any moment
`path` holds its old content or the new one, never a part. `abort()` (or an exception inside
`with AtomicFile(...)`) removes the temporary file. `write_atomic(path, data)` does the same for
bytes or text in hand. Every file that lmforge writes in place goes through here (run records,
task markers, manifests, checkpoint markers, token shards, coefficients...); publishing a whole
directory (an artifact, a checkpoint) by renaming it is its store's job.

Every temporary name has the same shape (`is_partial`), so a reader or a store's commit can
recognise and skip one a killed writer left behind. Neutral: `model/`, `tokenizer/` and
`pipeline/` all use it.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import TracebackType
from typing import TypeVar

W = TypeVar("W", bound="WholeOrNothing")

PARTIAL = ".partial-"
"""What every temporary name holds: `.<name>.partial-<8 hex digits>`."""


def partial_name(path: str | os.PathLike[str]) -> Path:
    """A fresh temporary name beside `path` (unique, so concurrent writers never collide)."""
    path = Path(path)
    return path.with_name(f".{path.name}{PARTIAL}{uuid.uuid4().hex[:8]}")


def is_partial(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a file still being written (or left by a writer that died)."""
    name = Path(path).name
    return name.startswith(".") and PARTIAL in name


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory, so the names created, renamed or removed in it are on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class WholeOrNothing:
    """A file being written that appears whole (`commit`) or not at all (`abort`): committed when
    its `with` block ends, aborted when the block raises."""

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self: W) -> W:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class AtomicFile(WholeOrNothing):
    """A binary file written under a temporary name and renamed into place once whole and on
    disk; use it as a context manager, or call `commit` or `abort` yourself."""

    def __init__(self, path: str | os.PathLike[str], *, mode: int = 0o666) -> None:
        """mode: the new file's permission bits (before the umask), 0o600 for a secret."""
        self.path = Path(path)
        self.partial = partial_name(self.path)
        """The temporary file (for writers that need its path, e.g. to map it)."""
        fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        self.handle = os.fdopen(fd, "wb")

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self.handle.write(data)

    def commit(self) -> None:
        """Flush and fsync the file, rename it to its name, fsync the directory."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.partial, self.path)
        fsync_dir(self.path.parent)

    def abort(self) -> None:
        """Drop what was written: the file at `path`, if any, is left as it was."""
        self.handle.close()
        self.partial.unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o666) -> None:
    """Write `data` (text as UTF-8) as the whole content of `path`, atomically and durably."""
    with AtomicFile(path, mode=mode) as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)


def create_exclusive(path: str | os.PathLike[str], data: bytes) -> bool:
    """Create `path` holding `data`, whole and on disk, only if no file has that name: True when
    this call created it, False when it existed (another process won). The file appears whole:
    it is written under a temporary name and hard-linked into place, which fails rather than
    replaces."""
    path = Path(path)
    partial = partial_name(path)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(partial, path)
        except FileExistsError:
            return False
        fsync_dir(path.parent)
        return True
    finally:
        partial.unlink(missing_ok=True)
