"""The `FileStore` on a local directory (or shared storage every node mounts at one path).

Files are written atomically and durably (`lmforge.durable`). A directory is written under a
hidden temporary name and published by `publish`: every file and directory of it fsynced, then
renamed into place, the parent fsynced so the rename itself survives a crash. A directory already
at the final place is first moved aside (kept there by its caller, or deleted), and put back if
the rename fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import BinaryIO

from lmforge.durable import AtomicFile, fsync_dir, write_atomic
from lmforge.pipeline.storage.location import local_path


def fsync_tree(root: str | Path) -> None:
    """fsync every file and directory under `root`, `root` last."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_dir(dirpath)


def durable_rename(source: Path, target: Path) -> None:
    """Rename `source` (already on disk) to `target` and fsync the directories involved."""
    os.replace(source, target)
    fsync_dir(target.parent)
    if source.parent != target.parent:
        fsync_dir(source.parent)


class LocalFiles:
    """Files under a local directory; relative POSIX paths name them."""

    renames = True
    """A directory is published by renaming it into place."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.base = local_path(root)
        self.root = str(self.base)

    def local_path(self, rel: str = "") -> Path:
        """Where `rel` is on this node (read and written in place)."""
        return self.base / rel if rel else self.base

    def uri(self, rel: str = "") -> str:
        return str(self.local_path(rel))

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            return self.local_path(rel).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write_bytes(self, rel: str, data: bytes) -> None:
        """The whole file `rel`, atomically and durably."""
        path = self.local_path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)

    def open_write(self, rel: str) -> AtomicFile:
        """`rel` to write, whole once committed (nothing of it after `abort`)."""
        path = self.local_path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        return AtomicFile(path)

    def open_read(self, rel: str) -> BinaryIO:
        return open(self.local_path(rel), "rb")  # noqa: SIM115 (the caller closes it)

    def size(self, rel: str) -> int | None:
        """Bytes of the file `rel`, None when there is no such file."""
        path = self.local_path(rel)
        return path.stat().st_size if path.is_file() else None

    def sizes(self, rel: str = "", *, recursive: bool = False) -> dict[str, int]:
        """Bytes of every file under the directory `rel` by its path relative to it ({} when
        there is no such directory)."""
        base = self.local_path(rel)
        if not base.is_dir():
            return {}
        paths = base.rglob("*") if recursive else base.iterdir()
        sizes = {}
        for path in paths:
            try:  # another process may remove a file once listed (a run releasing its storage)
                if path.is_file():
                    sizes[path.relative_to(base).as_posix()] = path.stat().st_size
            except FileNotFoundError:
                continue
        return sizes

    def delete_file(self, rel: str) -> None:
        self.local_path(rel).unlink(missing_ok=True)

    def delete_dir(self, rel: str) -> None:
        shutil.rmtree(self.local_path(rel), ignore_errors=True)

    def publish(self, pending: str, final: str, set_aside: str | None = None) -> None:
        """Make the complete directory `pending` the directory `final`, durably.

        A directory at `final` is moved to `set_aside` first (made if need be; the caller keeps
        or deletes it), and put back if the rename fails; without `set_aside` it is an error.
        """
        source, target = self.local_path(pending), self.local_path(final)
        fsync_tree(source)
        aside = self.local_path(set_aside) if set_aside and target.exists() else None
        try:
            if aside is not None:
                aside.parent.mkdir(parents=True, exist_ok=True)
                durable_rename(target, aside)
            durable_rename(source, target)
        except BaseException:
            if aside is not None and aside.exists() and not target.exists():
                os.replace(aside, target)
            raise
