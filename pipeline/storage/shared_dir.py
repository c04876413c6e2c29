"""A work directory that every task of a stage reads and writes, whatever node it runs on.

With a local store it is a directory on shared storage (under the workdir) and every method here
is a plain file operation. With a bucket store the nodes share nothing but the bucket: a task
writes under this node's mirror of the directory (`root`, a node-local path, the same on every
node) and `publish`es what it wrote: uploaded under `remote`, then kept in the node cache. A task
that needs a file written elsewhere `fetch`es it (through the node cache, bounded and evicted like
every cached file). Scratch files have no manifest: they are checked by size only.

Completion markers (`task_markers`) are published after the files they vouch for, so a marker
that exists anywhere vouches for files the bucket already holds.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from lmforge.pipeline.storage import task_markers
from lmforge.pipeline.storage.bucket_files import BucketFiles
from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES
from lmforge.pipeline.storage.file_store import upload
from lmforge.pipeline.storage.node_cache import CacheConfig, CachedFile, NodeCache, RemoteFile


class SharedDir:
    """`root` on shared storage (remote None), or a node-local mirror of the prefix `remote`."""

    def __init__(
        self,
        root: str,
        remote: str | None = None,
        cache: CacheConfig | None = None,
        generation: str = "",
    ) -> None:
        """`generation` names this content in the node cache (a new plan, a new name), so a
        node never takes a scratch file of an earlier run for one of this run."""
        if remote is not None and cache is None:
            raise ValueError("a bucket-backed work directory needs the node cache settings")
        self.root, self.remote, self.cache, self.generation = root, remote, cache, generation
        self._held: dict[Path, CachedFile] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_held"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _held={})

    def _rel(self, path: str | Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def _bucket(self) -> BucketFiles:
        """The bucket side of the directory (opened where the task runs)."""
        if self.remote is None:
            raise ValueError(f"the work directory {self.root} has no bucket side")
        return BucketFiles(self.remote)

    def _remote_file(self, path: Path, size: int) -> RemoteFile:
        rel = self._rel(path)
        name = "/".join(p for p in ("work", self.generation, *Path(self.root).parts[-2:], rel) if p)
        return RemoteFile(
            uri=f"{self.remote}/{rel}",
            name=name,
            size=size,
            sha256=None,
            block_bytes=DEFAULT_BLOCK_BYTES,
            block_sha256=(),
            label=f"{self.remote}/{rel}",
        )

    def fetch(self, path: str | Path) -> Path:
        """A local path holding the file `path` (under `root`), wherever it was written."""
        path = Path(path)
        if self.remote is None or path.is_file():
            return path
        if path not in self._held:
            size = self._bucket().size(self._rel(path))
            if size is None:
                raise FileNotFoundError(f"{self.remote}/{self._rel(path)} was never published")
            cached = NodeCache(self.cache).open(self._remote_file(path, size))
            self._held[path] = cached
        return self._held[path].local_path()

    def publish(self, *paths: str | Path) -> None:
        """Make files this task wrote under `root` readable from every node."""
        if self.remote is None:
            return
        for path in map(Path, paths):
            upload(self._bucket(), path, self._rel(path))
            cached = NodeCache(self.cache).open(self._remote_file(path, path.stat().st_size))
            cached.adopt(path)  # moved into the cache: no second copy, evictable
            cached.close()

    def exists(self, path: str | Path) -> bool:
        if Path(path).exists() or self.remote is None:
            return Path(path).exists()
        return self._bucket().size(self._rel(path)) is not None

    def save_array(self, path: str | Path, array: np.ndarray) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)  # a fresh node's mirror
        task_markers.save_array(path, array)
        self.publish(path)

    def load_array(self, path: str | Path) -> np.ndarray:
        return np.load(self.fetch(path), allow_pickle=False)

    def mark_done(self, path: str | Path, result: Any) -> None:
        """Record a finished task (after publishing its files)."""
        task_markers.mark_done(path, result)
        if self.remote is not None:
            self._bucket().write_bytes(self._rel(path), Path(path).read_bytes())

    def done_result(self, path: str | Path) -> Any | None:
        """What a finished task recorded, or None when it did not finish (on any node)."""
        found = task_markers.done_result(path)
        if found is not None or self.remote is None:
            return found
        try:
            found = self._bucket().read_bytes(self._rel(path))
            return None if found is None else json.loads(found)
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Delete the directory here and in the bucket (its cached copies age out)."""
        shutil.rmtree(self.root, ignore_errors=True)
        if self.remote is not None:
            with contextlib.suppress(OSError):
                self._bucket().delete_dir("")

    def release(self) -> None:
        """Let the cache evict the files this task fetched."""
        for cached in self._held.values():
            cached.close()
        self._held.clear()


LOCAL = SharedDir("/")
"""Plain local (or shared-storage) files: fetch and publish do nothing."""
