"""An input artifact in a bucket, read through the node cache: files are fetched on first use.

`ctx.input(name)` returns an `ArtifactPath`: the artifact's directory as a `pathlib.Path` with a
local store, an `InputPath` with a bucket; a stage uses only what both offer.

`InputPath` is what `ctx.input(name)` returns when the store is a bucket. It answers path
questions from the manifest (`/`, `glob`, `iterdir`, `exists`, `stat`: nothing is fetched), and
fetches into the node-local cache (`node_cache`) only what is read:

- `open_ranged()` / `memmap()`: the blocks a read touches (a Parquet footer and the row groups
  read, a slice of a token stream);
- `read_bytes()`, `open()`, and any use as a local path (`os.fspath`, `str`, `Path(...)`,
  `np.load`, `pq.ParquetFile`): the whole file, or every file under a directory.

It is small and picklable: a Ray task on another node gets it as an argument and reads through
that node's cache. Every block is verified against the manifest as it arrives; a corrupt file is
named with the stage to rerun.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

import numpy as np

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage.cached_reads import CachedArray, RangedReader
from lmforge.pipeline.storage.file_entries import block_layout
from lmforge.pipeline.storage.integrity import manifest_entries
from lmforge.pipeline.storage.node_cache import CacheConfig, CachedFile, NodeCache, RemoteFile
from lmforge.pipeline.storage.transfers import TransferProgress

FETCH_FILES_AT_ONCE = 8


@runtime_checkable
class ArtifactPath(Protocol):
    """A file or directory of an input artifact, read-only: what `pathlib.Path` (a local store)
    and `InputPath` (a bucket) both offer. Code that needs a local path calls `os.fspath` (with a
    bucket that fetches the files); `open_ranged` and `memmap`, an `InputPath`'s alone, are
    looked up with `getattr` where a stage can use them."""

    @property
    def name(self) -> str: ...
    @property
    def stem(self) -> str: ...
    @property
    def suffix(self) -> str: ...
    def __truediv__(self, other: str) -> ArtifactPath: ...
    def __fspath__(self) -> str: ...
    def exists(self) -> bool: ...
    def is_file(self) -> bool: ...
    def is_dir(self) -> bool: ...
    def stat(self) -> os.stat_result: ...
    def iterdir(self) -> Iterator[ArtifactPath]: ...
    def glob(self, pattern: str) -> Iterator[ArtifactPath]: ...
    def rglob(self, pattern: str) -> Iterator[ArtifactPath]: ...
    def read_bytes(self) -> bytes: ...
    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str: ...


class RemoteArtifact:
    """A committed artifact in a bucket: its manifest and where its files are."""

    def __init__(
        self, location: str, data_uri: str, stage: str, key: str, manifest: dict, cache: CacheConfig
    ) -> None:
        self.location, self.data_uri = location, data_uri.rstrip("/")
        self.stage, self.key, self.cache_config = stage, key, cache
        self.entries = {str(rel): e for rel, e in manifest_entries(location, manifest)}
        self.dirs = {str(p) for rel in self.entries for p in PurePosixPath(rel).parents}
        self._held: dict[str, CachedFile] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_held"], state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _held={}, _lock=threading.Lock())

    @property
    def local_root(self) -> Path:
        return Path(self.cache_config.dir) / "files" / self.stage / self.key

    def cached(self, rel: str) -> CachedFile:
        """The cached copy of file `rel`, held (never evicted) while this object lives."""
        with self._lock:
            if rel not in self._held:
                entry = self.entries[rel]
                block_bytes, hashes = block_layout(entry)
                remote = RemoteFile(
                    uri=f"{self.data_uri}/{rel}",
                    name=f"{self.stage}/{self.key}/{rel}",
                    size=entry["bytes"],
                    sha256=entry["sha256"],
                    block_bytes=block_bytes,
                    block_sha256=tuple(hashes),
                    label=f"{self.location}/{rel}",
                )
                self._held[rel] = NodeCache(self.cache_config).open(remote)
            return self._held[rel]

    def fetch(self, rels: list[str]) -> None:
        """Every byte of these files, verified, several files at once."""
        try:
            if len(rels) <= 1:
                for rel in rels:
                    self.cached(rel).ensure()
                return
            total = sum(self.entries[rel]["bytes"] for rel in rels)
            progress = TransferProgress(f"reading {self.location}", total)
            with ThreadPoolExecutor(FETCH_FILES_AT_ONCE) as pool:
                list(pool.map(lambda rel: self.cached(rel).ensure(progress=progress), rels))
            progress.finish()
        except ArtifactError as exc:
            raise self.corrupt(exc) from exc

    def corrupt(self, exc: ArtifactError) -> ArtifactError:
        if "does not match" not in str(exc) and "shorter" not in str(exc):
            return exc
        return ArtifactError(
            f"artifact {self.location} is corrupt in the store: {exc}; recompute it with "
            f"`lmforge rerun {self.stage}`"
        )

    def release(self) -> None:
        """Let the cache evict what this object held."""
        with self._lock:
            for held in self._held.values():
                held.close()
            self._held.clear()


class InputPath(os.PathLike):
    """A file or directory of a `RemoteArtifact`, used like a `pathlib.Path` (see module doc)."""

    __slots__ = ("artifact", "rel")

    def __init__(self, artifact: RemoteArtifact, rel: str = "") -> None:
        self.artifact, self.rel = artifact, rel

    # -- pure path operations
    def __truediv__(self, other: str) -> InputPath:
        rel = PurePosixPath(self.rel, other).as_posix()
        return InputPath(self.artifact, "" if rel == "." else rel)

    def joinpath(self, *parts: str) -> InputPath:
        path = self
        for part in parts:
            path = path / part
        return path

    @property
    def name(self) -> str:
        return PurePosixPath(self.rel).name if self.rel else self.artifact.key

    @property
    def stem(self) -> str:
        return PurePosixPath(self.name).stem

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def parent(self) -> InputPath:
        parent = PurePosixPath(self.rel).parent.as_posix() if self.rel else ""
        return InputPath(self.artifact, "" if parent == "." else parent)

    def __repr__(self) -> str:
        return f"InputPath({self.artifact.location!r}, {self.rel!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InputPath) and (self.artifact.location, self.rel) == (
            other.artifact.location,
            other.rel,
        )

    def __hash__(self) -> int:
        return hash((self.artifact.location, self.rel))

    def __lt__(self, other: InputPath) -> bool:
        return self.rel < other.rel

    # -- questions the manifest answers
    def is_file(self) -> bool:
        return self.rel in self.artifact.entries

    def is_dir(self) -> bool:
        return not self.rel or self.rel in self.artifact.dirs

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def stat(self) -> os.stat_result:
        if self.is_file():
            size = self.artifact.entries[self.rel]["bytes"]
            return os.stat_result((stat.S_IFREG | 0o444, 0, 0, 1, 0, 0, size, 0, 0, 0))
        if self.is_dir():
            return os.stat_result((stat.S_IFDIR | 0o555, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        raise FileNotFoundError(f"{self!r} is not in the artifact's manifest")

    def _below(self) -> list[str]:
        """Relative paths of every file and directory under this one."""
        prefix = f"{self.rel}/" if self.rel else ""
        names = (*self.artifact.entries, *self.artifact.dirs)
        return sorted(n for n in names if n.startswith(prefix) and n != "." and n != self.rel)

    def iterdir(self) -> Iterator[InputPath]:
        prefix = f"{self.rel}/" if self.rel else ""
        for name in self._below():
            if "/" not in name[len(prefix) :]:
                yield InputPath(self.artifact, name)

    def glob(self, pattern: str) -> Iterator[InputPath]:
        """Files and directories under this one matching `pattern` (`**` for any depth)."""
        prefix = f"{self.rel}/" if self.rel else ""
        wanted = pattern.split("/")
        for name in self._below():
            parts = name[len(prefix) :].split("/")
            if _match(parts, wanted):
                yield InputPath(self.artifact, name)

    def rglob(self, pattern: str) -> Iterator[InputPath]:
        return self.glob(f"**/{pattern}")

    # -- reading
    def _files(self) -> list[str]:
        if self.is_file():
            return [self.rel]
        prefix = f"{self.rel}/" if self.rel else ""
        return [r for r in self.artifact.entries if r.startswith(prefix)]

    def local_path(self) -> Path:
        """This file (or every file under this directory) fetched: its local path."""
        self.artifact.fetch(self._files())
        return self.artifact.local_root / self.rel if self.rel else self.artifact.local_root

    def __fspath__(self) -> str:
        return str(self.local_path())

    def __str__(self) -> str:
        return self.__fspath__()

    def read_bytes(self) -> bytes:
        return self.local_path().read_bytes()

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:
        return self.local_path().read_text(encoding=encoding, errors=errors)

    def open(self, mode: str = "r", *args, **kwargs):
        if set(mode) & set("wax+"):
            raise ValueError(f"{self!r} is an input: it opens for reading only")
        return open(self.local_path(), mode, *args, **kwargs)

    def read_range(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of this file; only the blocks they lie in are fetched."""
        try:
            return self.artifact.cached(self.rel).read(offset, length)
        except ArtifactError as exc:
            raise self.artifact.corrupt(exc) from exc

    def open_ranged(self) -> io.BufferedReader:
        """A seekable binary file that fetches only the blocks its reads touch."""
        if not self.is_file():
            raise FileNotFoundError(f"{self!r} is not a file of the artifact")
        return io.BufferedReader(RangedReader(self.artifact, self.rel), 1 << 16)

    def memmap(self, dtype: np.dtype, length: int) -> CachedArray:
        """The file as a 1-D array of `length` items, fetched block by block as it is sliced."""
        return CachedArray(self.artifact, self.rel, np.dtype(dtype), length)

    def __getattr__(self, name: str):
        """Any other `Path` attribute: that of the local copy, fetched first."""
        if name.startswith("_") or not hasattr(Path, name):
            raise AttributeError(name)  # probes such as hasattr(x, "read") fetch nothing
        return getattr(self.local_path(), name)


def _match(parts: list[str], wanted: list[str]) -> bool:
    if not wanted:
        return not parts
    if wanted[0] == "**":
        return any(_match(parts[i:], wanted[1:]) for i in range(len(parts) + 1))
    return (
        bool(parts) and fnmatch.fnmatchcase(parts[0], wanted[0]) and _match(parts[1:], wanted[1:])
    )
