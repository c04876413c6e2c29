"""Where a run's checkpoints live: `step_*` directories in the one store of `storage.file_store`,
a directory every node reaches or a bucket, published by their `COMPLETE` marker (`marker`).

`CheckpointStore` offers the same steps on either, called by `async_save`, `resume` and `export`:
- `begin(step)` (rank 0, before any rank writes): a directory for the new checkpoint. Locally a
  hidden `.step_000123.tmp-<id>/` that is renamed into place once complete, so nothing
  half-written is visible; in a bucket (nothing renames there) `step_000123/` itself, whose
  stale marker, if a broken copy of that step had one, is deleted first.
- `write_file(pending, name, head, body)` (every rank, for its own shards): a file written
  from the staged pages (O_DIRECT where the file system allows, `direct_write`) and fsynced, or
  a bucket upload (pyarrow's S3 streams upload big files in parts, several at once); either
  returns the file's size and the xxh3 digest computed as it went out (`storage.digests`).
- `publish(...)` (rank 0, once every rank has written): the JSON files, then the `COMPLETE`
  marker listing every file with the size and checksum its writer computed (nothing is read
  back), the rename into place (locally), then older checkpoints are pruned by marker and sizes
  (nothing is re-hashed).
- `newest_complete(skip)` (rank 0): the newest checkpoint whose marker and file sizes check out;
  `fetch(location, names, rank)` (every rank): a local directory holding those files, each
  checked against the marker's checksum. From a bucket only the named files are downloaded, into
  a staging directory of this rank alone (`rank_staging`), hashed as they arrive.
- `upload(directory)` / `download(name, staging)`: a whole checkpoint at once (the consolidated
  format's bucket copies, `bucket`). Uploads and downloads log their progress (`transfers`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from lmforge.durable import partial_name, write_atomic
from lmforge.pipeline.storage import digests
from lmforge.pipeline.storage.file_store import FileStore, download, open_files, upload
from lmforge.pipeline.storage.transfers import TransferProgress, copy_buffer
from lmforge.pipeline.training.checkpoint import direct_write
from lmforge.pipeline.training.checkpoint.marker import (
    MARKER,
    PENDING,
    file_problem,
    listed_files,
    marker_problem,
    marker_text,
    pending_name,
    step_dir_name,
    step_of,
    swap_copy_name,
)


def open_store(location: str) -> CheckpointStore:
    """The checkpoints under a directory path (`file://` included) or a bucket URI."""
    return CheckpointStore(location)


def text_record(text: str) -> dict:
    """{"bytes", "sha256"} of a JSON file's UTF-8 content, as a marker lists it."""
    return digests.record_of(text.encode(), digests.SHA256)


def local_staging(uri: str) -> Path:
    """A per-node directory for the local copies of the checkpoints under `uri`."""
    digest = hashlib.sha256(uri.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "lmforge-checkpoints" / digest
    path.mkdir(parents=True, exist_ok=True)
    return path


def rank_staging(uri: str, rank: int) -> Path:
    """This rank's own directory for downloaded shards: ranks sharing a node never meet
    (rank -1: the export task's)."""
    return local_staging(uri) / (f"rank-{rank:05d}" if rank >= 0 else "export")


class CheckpointStore:
    """The `step_*` checkpoints under one root, local or in a bucket."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.files: FileStore = open_files(location)

    @property
    def root(self) -> str:
        """The root's path or URI."""
        return self.files.root

    def step_location(self, name: str) -> str:
        """The path or URI of checkpoint `name`."""
        return self.files.uri(name)

    # -- the checkpoints there
    def steps(self) -> list[tuple[int, str, bool]]:
        """(step, name, has marker) of every `step_*` directory and swap copy holding files,
        newest first (one listing); for one step, `step_*` comes before its swap copies."""
        found: dict[str, tuple[int, bool]] = {}
        for rel in self.files.sizes(recursive=True):
            parts = rel.split("/")
            step = step_of(parts[0]) if len(parts) == 2 else None
            if step is not None:
                marked = found.get(parts[0], (step, False))[1] or parts[1] == MARKER
                found[parts[0]] = (step, marked)
        order = [(step, not n.startswith("."), n, marked) for n, (step, marked) in found.items()]
        return [(step, n, marked) for step, _, n, marked in sorted(order, reverse=True)]

    def size_problem(self, name: str) -> str | None:
        """Why checkpoint `name` is not complete by its marker and file sizes (nothing hashed)."""
        sizes = self.files.sizes(name)
        marker = self.files.read_bytes(f"{name}/{MARKER}") if MARKER in sizes else None
        return marker_problem(None if marker is None else marker.decode(), sizes)

    def newest_complete(self, skip: set[str]) -> str | None:
        """The location of the newest checkpoint whose marker and file sizes check out, not in
        `skip`; every newer one is skipped with a warning naming it and the reason."""
        for _, name, marked in self.steps():
            location = self.step_location(name)
            if location in skip or (not marked and name.startswith(".")):
                continue  # a swap copy whose upload died
            problem = self.size_problem(name) if marked else f"incomplete: no {MARKER} marker"
            if problem is None:
                return location
            warnings.warn(f"skipping checkpoint {location}: {problem}", stacklevel=2)
        return None

    def prune(self, keep: int) -> list[str]:
        """Delete all but the `keep` newest complete checkpoints; returns their locations.

        A checkpoint is kept only once its marker and file sizes check out (nothing is read or
        hashed), so a broken newer one never costs an older good one. Incomplete or corrupt
        `step_*` directories are kept for inspection (resuming skips them); swap copies not
        needed, and directories of local writes that died, are deleted. Call it from the run's
        only writer, after a write.
        """
        kept: set[int] = set()
        removed = []
        for step, name, marked in self.steps():
            complete = marked and self.size_problem(name) is None
            if complete and step not in kept and len(kept) < max(keep, 1):
                kept.add(step)
            elif complete or name.startswith("."):
                self.files.delete_dir(name)
                removed.append(self.step_location(name))
        local = self.files.local_path()
        if local is not None and local.is_dir():
            for leftover in (p for p in local.iterdir() if PENDING.match(p.name)):
                self.files.delete_dir(leftover.name)
        return removed

    # -- writing one, a file at a time from every rank
    def begin(self, step: int) -> str:
        """The directory the new checkpoint of `step` is written into (see the module doc)."""
        name = step_dir_name(step)
        local = self.files.local_path()
        if local is None:  # a broken copy of this step: it stops counting now
            self.files.delete_file(f"{name}/{MARKER}")
            return name
        pending = pending_name(name)
        (local / pending).mkdir(parents=True)
        return pending

    def write_file(
        self, pending: str, name: str, head: bytes, body: memoryview, *, midway=None, split_at=0
    ) -> dict:
        """One shard file of the pending checkpoint: {"bytes", "xxh3_128": hex}.

        midway: called once `split_at` bytes of the body are out (fault drills)."""
        algorithm = digests.SHARD_ALGORITHM
        rel = f"{pending}/{name}"
        local = self.files.local_path(rel)
        if local is not None:
            drill = {"midway": midway, "split_at": split_at}
            size, hexdigest = direct_write.write_file(local, head, body, algorithm, **drill)
            return {"bytes": size, algorithm: hexdigest}
        digest = digests.new_digest(algorithm)
        body = body.cast("B")
        progress = TransferProgress(f"uploading {self.files.uri(rel)}", len(head) + len(body))
        cut = split_at if midway is not None and 0 < split_at < len(body) else len(body)
        with self.files.open_write(rel) as out:
            copy_buffer(head, out, progress, digest)
            copy_buffer(body[:cut], out, progress, digest)
            if cut < len(body):
                midway()
                copy_buffer(body[cut:], out, progress, digest)
        progress.finish()
        return {"bytes": len(head) + len(body), algorithm: digest.hexdigest()}

    def publish(self, pending: str, step: int, texts: dict[str, str], files: dict, keep: int):
        """Write the JSON files and the marker (listing `files`, the shards' records, and the
        JSON files), make the checkpoint visible and prune; its location."""
        for name, text in texts.items():
            self.files.write_bytes(f"{pending}/{name}", text.encode())
        listed = files | {name: text_record(text) for name, text in texts.items()}
        self.files.write_bytes(f"{pending}/{MARKER}", marker_text(listed).encode())
        location = self.commit(pending, step)
        self.prune(keep)
        return location

    def commit(self, pending: str, step: int) -> str:
        """Make the complete checkpoint in `pending` the checkpoint of `step`; its location.

        Locally it is renamed into place; an older copy of the step is set aside as a swap copy
        first (it stands in for the step if the process dies meanwhile) and deleted after."""
        name = step_dir_name(step)
        if pending == name:  # a bucket: the marker published it
            return self.step_location(name)
        aside = swap_copy_name(name)
        try:
            self.files.publish(pending, name, set_aside=aside)
        except BaseException:
            self.files.delete_dir(pending)
            raise
        self.files.delete_dir(aside)
        return self.step_location(name)

    # -- reading one back
    def listed(self, location: str) -> dict[str, dict]:
        """The files the marker of the checkpoint at `location` lists."""
        return listed_files(self._marker(_name_of(location)))

    def _marker(self, name: str) -> bytes:
        marker = self.files.read_bytes(f"{name}/{MARKER}")
        if marker is None:
            raise FileNotFoundError(f"{self.step_location(name)} has no {MARKER} marker")
        return marker

    def fetch(self, location: str, names: list[str], rank: int) -> tuple[Path, str | None]:
        """A local directory holding the files `names` of the checkpoint at `location`, each
        checked against the marker's checksum; and the first problem found, or None."""
        name = _name_of(location)
        in_place = self.files.local_path(name)
        if in_place is not None:
            listed = self.listed(location)
            for file in names:
                if file not in listed:
                    return in_place, f"corrupt: {MARKER} does not list {file}"
                problem = file_problem(in_place / file, file, listed[file])
                if problem is not None:
                    return in_place, problem
            return in_place, None
        local = rank_staging(self.root, rank) / name
        local.mkdir(parents=True, exist_ok=True)
        marker = self._marker(name)
        write_atomic(local / MARKER, marker)
        listed = listed_files(marker)
        size = sum(int(listed[f].get("bytes", 0)) for f in names if f in listed)
        progress = TransferProgress(f"downloading {self.step_location(name)} (rank {rank})", size)
        for file in names:
            if file not in listed:
                return local, f"corrupt: {MARKER} does not list {file}"
            try:
                algorithm, expected = digests.recorded_digest(listed[file])
            except KeyError as exc:
                return local, f"corrupt: {MARKER} lists {file} without a checksum ({exc})"
            digest = digests.new_digest(algorithm)
            download(self.files, f"{name}/{file}", local / file, progress, digest)
            if digest.hexdigest() != expected:
                return local, f"corrupt: {file} does not match its {algorithm} in {MARKER}"
        progress.finish()
        return local, None

    def release(self, rank: int) -> None:
        """Drop this rank's downloaded files (read in place locally: nothing to drop)."""
        if self.files.local_path() is None:
            shutil.rmtree(rank_staging(self.root, rank), ignore_errors=True)

    # -- a whole checkpoint directory at once
    def upload(self, local: Path) -> str:
        """Upload the checkpoint directory `local` under its name, its marker last; its location.

        Rewriting a step that has a marker first uploads a complete swap copy beside it, which
        stands in for the step while its files are replaced and is deleted after.
        """
        name = local.name
        swap = None
        if self.files.size(f"{name}/{MARKER}") is not None:  # a restarted attempt
            swap = swap_copy_name(name)
            self._put(local, swap)
        self.files.delete_file(f"{name}/{MARKER}")
        self._put(local, name)
        if swap is not None:
            self.files.delete_dir(swap)
        return self.step_location(name)

    def _put(self, local: Path, name: str) -> None:
        files = sorted(p for p in local.iterdir() if p.is_file() and p.name != MARKER)
        files.append(local / MARKER)
        progress = TransferProgress(
            f"uploading {self.step_location(name)}", sum(p.stat().st_size for p in files)
        )
        for path in files:
            upload(self.files, path, f"{name}/{path.name}", progress)
        progress.finish()

    def download(self, name: str, staging: Path) -> Path:
        """A local copy of checkpoint `name` in `staging` (replaced if present); not verified."""
        tmp = partial_name(staging / name)
        tmp.mkdir(parents=True)
        try:
            sizes = self.files.sizes(name)
            progress = TransferProgress(
                f"downloading {self.step_location(name)}", sum(sizes.values())
            )
            for file in sorted(sizes):
                download(self.files, f"{name}/{file}", tmp / file, progress)
            progress.finish()
            final = staging / name
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final


def _name_of(location: str) -> str:
    """The step directory's name in a checkpoint's location (a path or a URI)."""
    return location.rstrip("/").rsplit("/", 1)[-1]
