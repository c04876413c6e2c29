"""Reading a file of an input artifact in ranges, through the node cache: a seekable binary file
(`RangedReader`, for Parquet footers and row groups) and a 1-D array (`CachedArray`, for token
streams) that fetch only the blocks a read touches. The artifact (`ArtifactFiles`, e.g.
`input_artifact.RemoteArtifact`) holds the cached files and names a corrupt one.

`open_object` is the same cache for an object of the bucket outside any artifact (a checkpoint
shard, say): fetched whole or in ranges, checked by size (and sha256 when the caller knows it).
"""

from __future__ import annotations

import io
from typing import Any, Protocol

import numpy as np

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage.bucket_files import filesystem
from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES
from lmforge.pipeline.storage.node_cache import CacheConfig, CachedFile, NodeCache, RemoteFile


class ArtifactFiles(Protocol):
    """What the readers need of an input artifact (`input_artifact.RemoteArtifact` is one)."""

    entries: dict[str, dict[str, Any]]
    """The manifest entry of each file, by relative path."""

    def cached(self, rel: str) -> CachedFile:
        """The node cache's copy of file `rel`, held while the artifact lives."""
        ...

    def corrupt(self, exc: ArtifactError) -> ArtifactError:
        """The error to raise for a file that failed its check."""
        ...


class RangedReader(io.RawIOBase):
    """A file of the artifact opened for reading; each read fetches the blocks it covers."""

    def __init__(self, artifact: ArtifactFiles, rel: str) -> None:
        super().__init__()
        self.artifact, self.rel = artifact, rel
        self.size = artifact.entries[rel]["bytes"]
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        try:
            data = self.artifact.cached(self.rel).read(self.position, len(buffer))
        except ArtifactError as exc:
            raise self.artifact.corrupt(exc) from exc
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)


class CachedArray:
    """A read-only 1-D array over a cached file; slicing fetches only the blocks it covers."""

    ndim = 1

    def __init__(self, artifact: ArtifactFiles, rel: str, dtype: np.dtype, length: int) -> None:
        self.artifact, self.rel, self.dtype = artifact, rel, dtype
        self.shape = (length,)
        self._map: np.ndarray | None = None

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def size(self) -> int:
        return self.shape[0]

    def _ensure(self, start: int, stop: int) -> np.ndarray:
        item = self.dtype.itemsize
        try:
            self.artifact.cached(self.rel).ensure(start * item, (stop - start) * item)
        except ArtifactError as exc:
            raise self.artifact.corrupt(exc) from exc
        if self._map is None:
            path = self.artifact.cached(self.rel).path
            self._map = np.memmap(path, dtype=self.dtype, mode="r", shape=self.shape)
        return self._map

    def __getitem__(self, key):
        if not len(self):
            return np.zeros(0, self.dtype)[key]
        if isinstance(key, slice) and (key.step or 1) > 0:
            start, stop, _ = key.indices(len(self))
            return self._ensure(start, max(start, stop))[key]
        if isinstance(key, int | np.integer):
            index = int(key) % len(self) if -len(self) <= key < len(self) else int(key)
            return self._ensure(index, index + 1)[key]
        return self._ensure(0, len(self))[key]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self._ensure(0, len(self)) if len(self) else np.zeros(0, self.dtype)
        return np.asarray(whole, dtype=dtype)


def open_object(uri: str, cache: CacheConfig, sha256: str | None = None) -> CachedFile:
    """An object of the bucket held in the node cache, under `objects/<bucket>/<key>`: call
    `local_path()` for the whole file or `read(offset, n)` for a range; close it when done.
    Without `sha256` the cached copy is checked by size only."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if not info.is_file:
        raise FileNotFoundError(f"{uri} is not an object of the bucket")
    remote = RemoteFile(
        uri=uri,
        name=f"objects/{path}",
        size=info.size,
        sha256=sha256,
        block_bytes=max(1, info.size) if sha256 else DEFAULT_BLOCK_BYTES,
        block_sha256=(sha256,) if sha256 else (),
        label=uri,
    )
    return NodeCache(cache).open(remote)
