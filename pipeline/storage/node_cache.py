"""A bounded node-local cache of files in a bucket, shared by every process of the node.

Each cached file is a sparse local copy filled block by block as readers ask for byte ranges
(`CachedFile.ensure`): a stage that reads a small part of an artifact downloads only that part.
Every block is checked against its sha256 from the manifest before it counts as present, so a
ranged read is verified too (`file_entries` explains the blocks).

Layout under the cache directory:
- `files/<name>`: the data, sparse until every block is in;
- `state/<name>.have`: a header naming the content (sha256, block size, size), then one byte per
  block (1 = fetched and verified);
- `state/<name>.use`: held with a shared `flock` by every open `CachedFile` (a file in use is
  never evicted); its modification time is the last use, for LRU eviction.

Processes coordinate with `flock` only: fetching a file's blocks holds its `.have` exclusively
(two processes never download the same block at once), eviction holds `.evict.lock` and takes a
victim's `.use` exclusively without waiting (so only files nobody holds go). Locks die with their
process, so a killed reader never wedges the cache. `max_bytes` bounds the data on disk; when
what is in use leaves no room the fetch fails naming `cluster.cache.max_gb`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.errors import ArtifactError, LmforgeError
from lmforge.pipeline.storage.bucket_files import filesystem
from lmforge.pipeline.storage.digests import ARTIFACT_ALGORITHM, digest_bytes
from lmforge.pipeline.storage.transfers import TransferProgress

HEADER = 160
"""Bytes of a `.have` header (content identity, space-padded, newline-terminated)."""
REQUEST_BYTES = 16 << 20
"""A fetch asks the server for at most this much in one ranged GET."""
FETCH_THREADS = 8


class CacheFull(LmforgeError):
    """The files in use on this node leave no room for the bytes asked for."""


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Where the node-local cache lives (the same path on every node) and how big it may grow."""

    dir: str
    max_bytes: int


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file in the store as its manifest describes it."""

    uri: str
    """Where to read it (s3://bucket/...)."""
    name: str
    """Its relative place in the cache, e.g. `<stage>/<key>/<rel>`."""
    size: int
    sha256: str | None
    """None: not verified (scratch files between tasks, which have no manifest)."""
    block_bytes: int
    block_sha256: tuple[str, ...]
    label: str = ""
    """How errors name it."""

    def identity(self) -> bytes:
        text = f"{self.sha256 or '-'} {self.block_bytes} {self.size}"
        return text.encode().ljust(HEADER - 1) + b"\n"

    @property
    def blocks(self) -> int:
        return -(-self.size // self.block_bytes) if self.size else 0


class NodeCache:
    """The cache under one directory; `open` a file to read it."""

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.root = Path(config.dir)
        self.files = self.root / "files"
        self.state = self.root / "state"

    def open(self, remote: RemoteFile) -> CachedFile:
        """Hold `remote`'s cached copy (nothing is fetched yet); close it when done."""
        return CachedFile(self, remote)

    def usage(self) -> int:
        """Bytes of cached data on disk (sparse files count what they hold)."""
        total = 0
        for dirpath, _, names in os.walk(self.files):
            for name in names:
                with contextlib.suppress(FileNotFoundError):  # evicted meanwhile
                    total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
        return total

    def reserve(self, nbytes: int, what: str) -> None:
        """Make room for `nbytes` more, evicting the least recently used files nobody holds."""
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / ".evict.lock", fcntl.LOCK_EX):
            used = self.usage()
            if used + nbytes <= self.config.max_bytes:
                return
            by_age = sorted(self.state.rglob("*.use"), key=_mtime)
            for use_file in by_age:
                used -= self._evict(use_file)
                if used + nbytes <= self.config.max_bytes:
                    return
        raise CacheFull(
            f"the node cache {self.root} cannot take {nbytes / 2**20:.1f} MB more for {what}: "
            f"{used / 2**30:.2f} GB are held by files in use and the limit is "
            f"{self.config.max_bytes / 2**30:.2f} GB; raise cluster.cache.max_gb"
        )

    def _evict(self, use_file: Path) -> int:
        """Drop one entry if nobody holds it; the bytes freed."""
        try:
            fd = os.open(use_file, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0
            name = use_file.relative_to(self.state).as_posix()[: -len(".use")]
            data = self.files / name
            freed = data.stat().st_blocks * 512 if data.exists() else 0
            data.unlink(missing_ok=True)
            (self.state / f"{name}.have").unlink(missing_ok=True)
            use_file.unlink(missing_ok=True)  # last, while still locked: see CachedFile._pin
            return freed
        finally:
            os.close(fd)


class CachedFile:
    """One cached file held open (its `.use` lock shared): `ensure` ranges, then read them."""

    def __init__(self, cache: NodeCache, remote: RemoteFile) -> None:
        self.cache, self.remote = cache, remote
        self.path = cache.files / remote.name
        self._complete = False
        self._lock = threading.Lock()
        self._use = self._pin(cache.state / f"{remote.name}.use")
        try:
            self._have = os.open(cache.state / f"{remote.name}.have", os.O_RDWR | os.O_CREAT)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._data = os.open(self.path, os.O_RDWR | os.O_CREAT)
            self._check_identity()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _pin(use_file: Path) -> int:
        """Open and share-lock `.use`; retried when an evictor removed it meanwhile."""
        use_file.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(use_file, os.O_RDWR | os.O_CREAT)
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                if os.stat(use_file).st_ino == os.fstat(fd).st_ino:
                    os.utime(fd)
                    return fd
            except FileNotFoundError:
                pass
            os.close(fd)

    def _check_identity(self) -> None:
        """Start a fresh copy when the cached one is of other content (or none)."""
        fcntl.flock(self._have, fcntl.LOCK_EX)
        try:
            identity = self.remote.identity()
            if os.pread(self._have, HEADER, 0) == identity and self._data_is_current():
                return
            if os.fstat(self._have).st_size:  # another version: only if nobody else reads it
                try:
                    fcntl.flock(self._use, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    fcntl.flock(self._use, fcntl.LOCK_SH)
                    raise ArtifactError(
                        f"the node cache holds another version of {self.remote.label} that "
                        "another process is reading; rerun once it has finished"
                    ) from None
            # A new inode, never a truncated one: a reader may still map the old content.
            os.close(self._data)
            self.path.unlink(missing_ok=True)
            self._data = os.open(self.path, os.O_RDWR | os.O_CREAT)
            os.ftruncate(self._data, self.remote.size)
            os.ftruncate(self._have, 0)
            os.pwrite(self._have, identity + bytes(self.remote.blocks), 0)
            fcntl.flock(self._use, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._have, fcntl.LOCK_UN)

    def _data_is_current(self) -> bool:
        """Hold the data file the cache names now. Another process may have started the copy
        (a new inode) between this one opening the path and taking the lock: blocks written
        through the old descriptor would be marked present but never reach the named file.
        False when the file is gone."""
        try:
            current = os.stat(self.path).st_ino
        except FileNotFoundError:
            return False
        if os.fstat(self._data).st_ino != current:
            fresh = os.open(self.path, os.O_RDWR)
            try:  # dup2: other threads reading through the descriptor never see it closed
                os.dup2(fresh, self._data)
            finally:
                os.close(fresh)
        return True

    def _missing(self, first: int, last: int) -> list[int]:
        have = os.pread(self._have, last - first + 1, HEADER + first)
        return [first + i for i, flag in enumerate(have) if not flag]

    def ensure(
        self, offset: int = 0, length: int | None = None, progress: TransferProgress | None = None
    ) -> None:
        """Fetch and verify the blocks of bytes [offset, offset + length) that are not here;
        counted in `progress` (a transfer of several files) or logged on their own."""
        size = self.remote.size
        end = size if length is None else min(size, offset + length)
        if self._complete or end <= offset:
            return
        block = self.remote.block_bytes
        first, last = offset // block, (end - 1) // block
        if not self._missing(first, last):
            self._hold_present_data()
            self._complete = first == 0 and last == self.remote.blocks - 1
            return
        with self._lock:
            fcntl.flock(self._have, fcntl.LOCK_EX)
            try:
                missing = self._missing(first, last)
                if missing:
                    self._fetch(missing, progress)
                else:
                    self._hold_present_data()
            finally:
                fcntl.flock(self._have, fcntl.LOCK_UN)
        self._complete = first == 0 and last == self.remote.blocks - 1

    def _hold_present_data(self) -> None:
        """Blocks another process marked present may be in a file this one does not hold:
        `adopt` moves a whole new file in (a new inode) and marks every block. Checked after
        the flags were read, so the file held then has every block the flags promised."""
        if not self._data_is_current():
            raise ArtifactError(
                f"the node cache's copy of {self.remote.label or self.remote.name} went "
                "away while in use; rerun"
            )

    def _fetch(self, blocks: list[int], shared: TransferProgress | None) -> None:
        remote, block = self.remote, self.remote.block_bytes
        runs: list[list[int]] = []
        per_request = max(1, REQUEST_BYTES // block)
        for b in blocks:
            if runs and b == runs[-1][-1] + 1 and len(runs[-1]) < per_request:
                runs[-1].append(b)
            else:
                runs.append([b])
        nbytes = sum(min(block, remote.size - b * block) for b in blocks)
        self.cache.reserve(nbytes, remote.label or remote.name)
        progress = shared or TransferProgress(f"downloading {remote.label or remote.name}", nbytes)
        fs, path = filesystem(remote.uri)
        if len(runs) == 1:
            self._fetch_run(fs, path, runs[0], progress)
        else:
            with ThreadPoolExecutor(min(FETCH_THREADS, len(runs))) as pool:
                list(pool.map(lambda run: self._fetch_run(fs, path, run, progress), runs))
        if shared is None:
            progress.finish()

    def _fetch_run(self, fs, path: str, run: list[int], progress: TransferProgress) -> None:
        remote, block = self.remote, self.remote.block_bytes
        start = run[0] * block
        length = min(remote.size, (run[-1] + 1) * block) - start
        try:
            with fs.open_input_file(path) as src:
                data = src.read_at(length, start)
        except OSError as exc:
            raise ArtifactError(f"cannot read {remote.label or remote.uri}: {exc}") from exc
        if len(data) != length:
            raise ArtifactError(
                f"{remote.label} is shorter in the store than its manifest says ({remote.size} "
                "bytes)"
            )
        view = memoryview(data)
        for i, b in enumerate(run):
            chunk = view[i * block : i * block + block]
            expected = remote.block_sha256[b] if remote.sha256 is not None else None
            if expected is not None and digest_bytes(chunk, ARTIFACT_ALGORITHM) != expected:
                where = f" (block {b} of {remote.blocks})" if remote.blocks > 1 else ""
                raise ArtifactError(
                    f"{remote.label} does not match its sha256 in the manifest{where}"
                )
            os.pwrite(self._data, chunk, b * block)
        os.pwrite(self._have, b"\1" * len(run), HEADER + run[0])
        progress.add(length)

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) (fewer at the end of the file), fetched if needed."""
        self.ensure(offset, length)
        return os.pread(self._data, max(0, min(length, self.remote.size - offset)), offset)

    def local_path(self) -> Path:
        """The whole file, fetched and verified: a local path to open, map or hand on."""
        self.ensure()
        return self.path

    def close(self) -> None:
        for name in ("_data", "_have", "_use"):
            fd = getattr(self, name, None)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)

    def adopt(self, local: Path) -> None:
        """Take `local` (this file's content, just written here) as the cached copy, moving it
        in instead of downloading it again; dropped when the copy is already here."""
        self.cache.reserve(self.remote.size, self.remote.label or self.remote.name)
        fcntl.flock(self._have, fcntl.LOCK_EX)
        try:
            if not self._missing(0, self.remote.blocks - 1) or self.remote.size == 0:
                local.unlink(missing_ok=True)
                return
            os.close(self._data)
            os.replace(local, self.path)
            self._data = os.open(self.path, os.O_RDWR)
            os.pwrite(self._have, b"\1" * self.remote.blocks, HEADER)
            self._complete = True
        finally:
            fcntl.flock(self._have, fcntl.LOCK_UN)

    def __del__(self) -> None:
        with contextlib.suppress(OSError, TypeError):  # TypeError: interpreter shutdown
            self.close()


class _locked:
    def __init__(self, path: Path, mode: int) -> None:
        self.path, self.mode = path, mode

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self.fd, self.mode)

    def __exit__(self, *exc) -> None:
        os.close(self.fd)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
