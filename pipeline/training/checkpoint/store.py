"""Where a run's sharded checkpoints live: a directory every node reaches, or a bucket URI.

Both stores offer the same steps, called by `async_save` and `resume`:
- `begin(step)` (rank 0, before any rank writes): a directory for the new checkpoint. Locally a
  hidden `.step_000123.tmp-<id>/` that is renamed into place once complete, so nothing
  half-written is visible; in a bucket (nothing renames there) `step_000123/` itself, whose
  stale marker, if a broken copy of that step had one, is deleted first.
- `write_file(pending, name, head, body)` (every rank, for its own shards): a file written
  from the staged pages (O_DIRECT where the file system allows, `direct_write`) and fsynced, or
  a bucket upload (pyarrow's S3 streams upload big files in parts, several at once); either
  returns the file's size and the checksum computed as it went out (`digests`).
- `publish(...)` (rank 0, once every rank has written): the JSON files, then the `COMPLETE`
  marker listing every file with the size and checksum its writer computed (nothing is read
  back), then older checkpoints are pruned by marker and sizes (nothing is re-hashed).
- `newest_complete(skip)` (rank 0): the newest checkpoint whose marker and file sizes check out;
  `fetch(location, names, rank)` (every rank): a local directory holding those files, each
  checked against the marker's checksum. From a bucket only the named files are downloaded, into
  a staging directory of this rank alone (`rank_staging`), hashed as they arrive.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow.fs as pafs

from lmforge.durable import AtomicFile, fsync_dir
from lmforge.pipeline.storage import digests
from lmforge.pipeline.storage.location import is_bucket, local_path
from lmforge.pipeline.training.checkpoint import bucket as remote
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.direct_write import write_file


def open_store(location: str) -> LocalStore | BucketStore:
    """The store of a checkpoint directory path or bucket URI."""
    return BucketStore(location) if is_bucket(location) else LocalStore(location)


def text_record(text: str) -> dict:
    """{"bytes", "sha256"} of a JSON file's UTF-8 content, as a marker lists it."""
    return digests.record_of(text.encode(), digests.SHA256)


class LocalStore:
    """Checkpoints under a directory (shared by every node that runs a worker)."""

    def __init__(self, root: str) -> None:
        self.root = local_path(root)

    def begin(self, step: int) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        pending = f".{ckpt.step_dir_name(step)}.tmp-{uuid.uuid4().hex[:8]}"
        (self.root / pending).mkdir()
        return pending

    @contextlib.contextmanager
    def open_output(self, pending: str, name: str) -> Iterator[BinaryIO]:
        with open(self.root / pending / name, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())

    def write_file(self, pending: str, name: str, head: bytes, body: memoryview, **drill) -> dict:
        """One shard file of the pending checkpoint: {"bytes", "<algorithm>": hex}."""
        algorithm = digests.SHARD_ALGORITHM
        size, digest = write_file(self.root / pending / name, head, body, algorithm, **drill)
        return {"bytes": size, algorithm: digest}

    def publish(self, pending: str, step: int, texts: dict[str, str], files: dict, keep: int):
        directory = self.root / pending
        for name, text in texts.items():
            with self.open_output(pending, name) as out:
                out.write(text.encode())
        listed = files | {name: text_record(text) for name, text in texts.items()}
        ckpt.write_marker(directory, ckpt.marker_text(listed))
        fsync_dir(directory)
        final = self.root / ckpt.step_dir_name(step)
        ckpt.move_into_place(directory, final)
        ckpt.prune_checkpoints(self.root, keep)
        return str(final)

    def newest_complete(self, skip: set[str]) -> str | None:
        for _, path in ckpt.list_checkpoints(self.root):
            if str(path) in skip:
                continue
            problem = ckpt.verify_checkpoint(path, hashes=False)
            if problem is None:
                return str(path)
            warnings.warn(f"skipping checkpoint {path}: {problem}", stacklevel=2)
        return None

    def listed(self, location: str) -> dict[str, dict]:
        """The files the marker of the checkpoint at `location` lists."""
        return _listed(Path(location) / ckpt.MARKER)

    def fetch(self, location: str, names: list[str], rank: int) -> tuple[Path, str | None]:
        path = Path(location)
        listed = self.listed(location)
        for name in names:
            if name not in listed:
                return path, f"corrupt: {ckpt.MARKER} does not list {name}"
            problem = ckpt.file_problem(path / name, name, listed[name])
            if problem is not None:
                return path, problem
        return path, None

    def release(self, rank: int) -> None:
        """Nothing to clean: files are read where they are."""


class BucketStore:
    """Checkpoints under a bucket URI (credentials from the environment)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self.remote = remote.RemoteCheckpoints(self.uri)
        self.fs, self.base = self.remote.fs, self.remote.base

    def begin(self, step: int) -> str:
        name = ckpt.step_dir_name(step)
        with contextlib.suppress(OSError):  # a broken copy of this step: it stops counting now
            self.fs.delete_file(f"{self.base}/{name}/{ckpt.MARKER}")
        return name

    def open_output(self, pending: str, name: str):
        return self.fs.open_output_stream(f"{self.base}/{pending}/{name}")

    def write_file(
        self, pending: str, name: str, head: bytes, body: memoryview, *, midway=None, split_at=0
    ) -> dict:
        """One shard file of the pending checkpoint, uploaded: {"bytes", "<algorithm>": hex}."""
        algorithm = digests.SHARD_ALGORITHM
        digest = digests.new_digest(algorithm)
        body = body.cast("B")
        with self.open_output(pending, name) as out:
            digest.update(head)
            out.write(head)
            cuts = sorted({0, split_at if midway is not None else 0, len(body)})
            for start, stop in zip(cuts, cuts[1:], strict=False):
                if midway is not None and start == split_at and start > 0:
                    midway()
                for piece in range(start, stop, digests.CHUNK):
                    part = body[piece : min(piece + digests.CHUNK, stop)]
                    digest.update(part)
                    out.write(part)
        return {"bytes": len(head) + len(body), algorithm: digest.hexdigest()}

    def publish(self, pending: str, step: int, texts: dict[str, str], files: dict, keep: int):
        for name, text in texts.items():
            with self.open_output(pending, name) as out:
                out.write(text.encode())
        listed = files | {name: text_record(text) for name, text in texts.items()}
        with self.open_output(pending, ckpt.MARKER) as out:
            out.write(ckpt.marker_text(listed).encode())
        self.remote.prune(keep)
        return self.remote.step_uri(pending)

    def newest_complete(self, skip: set[str]) -> str | None:
        for _, name, marked in self.remote.steps():
            uri = self.remote.step_uri(name)
            if uri in skip or (not marked and name.startswith(".")):
                continue
            problem = self.remote.size_problem(name) if marked else "incomplete: no marker"
            if problem is None:
                return uri
            warnings.warn(f"skipping checkpoint {uri}: {problem}", stacklevel=2)
        return None

    def listed(self, location: str) -> dict[str, dict]:
        name = location.rstrip("/").rsplit("/", 1)[1]
        with self.fs.open_input_stream(f"{self.base}/{name}/{ckpt.MARKER}") as handle:
            return json.loads(handle.read())["files"]

    def fetch(self, location: str, names: list[str], rank: int) -> tuple[Path, str | None]:
        name = location.rstrip("/").rsplit("/", 1)[1]
        local = rank_staging(self.uri, rank) / name
        local.mkdir(parents=True, exist_ok=True)
        with self.fs.open_input_stream(f"{self.base}/{name}/{ckpt.MARKER}") as handle:
            (local / ckpt.MARKER).write_bytes(handle.read())
        listed = _listed(local / ckpt.MARKER)
        for file in names:
            if file not in listed:
                return local, f"corrupt: {ckpt.MARKER} does not list {file}"
            try:
                algorithm, expected = digests.recorded_digest(listed[file])
            except KeyError as exc:
                return local, f"corrupt: {ckpt.MARKER} lists {file} without a checksum ({exc})"
            source = f"{self.base}/{name}/{file}"
            if download_file(self.fs, source, local / file, algorithm) != expected:
                return local, f"corrupt: {file} does not match its {algorithm} in {ckpt.MARKER}"
        return local, None

    def release(self, rank: int) -> None:
        shutil.rmtree(rank_staging(self.uri, rank), ignore_errors=True)


def rank_staging(uri: str, rank: int) -> Path:
    """This rank's own directory for downloaded shards: ranks sharing a node never meet
    (rank -1: the export task's)."""
    return remote.local_staging(uri) / (f"rank-{rank:05d}" if rank >= 0 else "export")


def download_file(fs: pafs.FileSystem, source: str, target: Path, algorithm: str = "sha256") -> str:
    """Copy one bucket object to a local file (whole or not at all: `AtomicFile`); returns the
    `algorithm` digest of the bytes, computed as they arrive."""
    digest = digests.new_digest(algorithm)
    with fs.open_input_stream(source) as src, AtomicFile(target) as dst:
        while block := src.read(1 << 22):
            digest.update(block)
            dst.write(block)
    return digest.hexdigest()


def _listed(marker: Path) -> dict[str, dict]:
    return json.loads(marker.read_text())["files"]
