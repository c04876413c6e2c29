"""Training checkpoints under a filesystem URI every node reaches (an S3-compatible bucket).

The bucket side of `checkpoint`: listing steps, marker-and-size checks, pruning, and the
consolidated format's upload and download. Sharded checkpoints go through
`checkpoint_store.BucketStore`, which uses this class and its staging directory.

The layout and the checks are those of `checkpoint`: `<uri>/step_000123/` holds the same files,
and `COMPLETE` is uploaded last, so a reader that sees the marker sees every file (an upload that
died leaves a directory without it, which is skipped). Nothing renames in a bucket, so rewriting
a step first uploads a complete swap copy that stands in for the step meanwhile; pruning keeps a
checkpoint only once its marker and file sizes check out. Rank 0 writes a checkpoint into a local
staging directory and uploads it; resuming downloads the chosen one into a local staging
directory on each node and verifies every file against the marker's sha256 before loading.
Credentials come from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_ENDPOINT_URL`), as for the artifact store.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path

import pyarrow.fs as pafs

from lmforge.pipeline.storage.location import is_bucket, local_path
from lmforge.pipeline.training.checkpoint import consolidated as ckpt

_STEP_DIR = re.compile(r"^step_(\d+)$")


def _step(name: str) -> int | None:
    """The step of a `step_*` directory or of a swap copy, else None."""
    match = _STEP_DIR.match(name) or ckpt.SWAP_COPY.match(name)
    return int(match.group(1)) if match else None


def local_staging(uri: str) -> Path:
    """A per-node directory for the local copies of the checkpoints under `uri`."""
    digest = hashlib.sha256(uri.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "lmforge-checkpoints" / digest
    path.mkdir(parents=True, exist_ok=True)
    return path


class RemoteCheckpoints:
    """The `step_*` checkpoints under one URI."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self.fs, self.base = pafs.FileSystem.from_uri(self.uri)

    def step_uri(self, name: str) -> str:
        return f"{self.uri}/{name}"

    def upload(self, local: Path) -> str:
        """Upload the checkpoint directory `local`, its marker last; returns its URI.

        Rewriting a step that has a marker first uploads a complete swap copy beside it, which
        stands in for the step while its files are replaced and is deleted after.
        """
        name = local.name
        marker = f"{self.base}/{name}/{ckpt.MARKER}"
        swap = None
        if self.fs.get_file_info(marker).type == pafs.FileType.File:  # a restarted attempt
            swap = ckpt.swap_copy_name(name)
            self._put(local, swap)
        self._delete_file(marker)
        self._put(local, name)
        if swap is not None:
            self.fs.delete_dir(f"{self.base}/{swap}")
        return self.step_uri(name)

    def _put(self, local: Path, name: str) -> None:
        files = sorted(p for p in local.iterdir() if p.is_file() and p.name != ckpt.MARKER)
        for path in [*files, local / ckpt.MARKER]:
            with (
                open(path, "rb") as src,
                self.fs.open_output_stream(f"{self.base}/{name}/{path.name}") as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 22)

    def steps(self) -> list[tuple[int, str, bool]]:
        """(step, name, has marker) of every `step_*` directory and swap copy, newest first.

        For one step, `step_*` comes before its swap copies.
        """
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.base, recursive=True))
        except FileNotFoundError:
            return []
        names: dict[str, bool] = {}
        for info in infos:
            parts = info.path[len(self.base) :].strip("/").split("/")
            if len(parts) == 2 and _step(parts[0]) is not None and info.type == pafs.FileType.File:
                names[parts[0]] = names.get(parts[0], False) or parts[1] == ckpt.MARKER
        found = [(_step(n), not n.startswith("."), n, marked) for n, marked in names.items()]
        return [(step, n, marked) for step, _, n, marked in sorted(found, reverse=True)]

    def size_problem(self, name: str) -> str | None:
        """Why checkpoint `name` is not complete by its marker and file sizes (nothing hashed)."""
        prefix = f"{self.base}/{name}"
        infos = self.fs.get_file_info(pafs.FileSelector(prefix, allow_not_found=True))
        sizes = {i.base_name: i.size for i in infos if i.type == pafs.FileType.File}
        marker = None
        if ckpt.MARKER in sizes:
            with self.fs.open_input_stream(f"{prefix}/{ckpt.MARKER}") as handle:
                marker = handle.read().decode()
        return ckpt.marker_problem(marker, sizes)

    def download(self, name: str, staging: Path) -> Path:
        """A local copy of checkpoint `name` in `staging` (replaced if present); not verified."""
        tmp = staging / f".{name}.download-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            selector = pafs.FileSelector(f"{self.base}/{name}", recursive=False)
            for info in self.fs.get_file_info(selector):
                if info.type == pafs.FileType.File:
                    src = self.fs.open_input_stream(info.path)
                    with src, open(tmp / info.base_name, "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 22)
            final = staging / name
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def latest_valid(self, staging: Path) -> str | None:
        """URI of the newest checkpoint whose files match its marker, or None.

        Newer ones without a marker or with mismatching files are skipped with a warning.
        """
        for _, name, marked in self.steps():
            if not marked and name.startswith("."):
                continue  # a swap copy whose upload died
            if not marked:
                problem = f"incomplete: no {ckpt.MARKER} marker"
            else:
                problem = ckpt.verify_checkpoint(self.download(name, staging))
            if problem is None:
                return self.step_uri(name)
            warnings.warn(f"skipping checkpoint {self.step_uri(name)}: {problem}", stacklevel=2)
        return None

    def prune(self, keep: int) -> list[str]:
        """Delete all but the `keep` newest complete checkpoints; returns their URIs.

        A checkpoint is kept only once its marker and file sizes check out (nothing is
        downloaded or hashed), so a broken newer one never costs an older good one. Incomplete
        or corrupt `step_*` directories are kept for inspection, like local ones; swap copies
        not needed are deleted.
        """
        kept: set[int] = set()
        removed = []
        for step, name, marked in self.steps():
            complete = marked and self.size_problem(name) is None
            if complete and step not in kept and len(kept) < max(keep, 1):
                kept.add(step)
            elif complete or name.startswith("."):
                self.fs.delete_dir(f"{self.base}/{name}")
                removed.append(self.step_uri(name))
        return removed

    def _delete_file(self, path: str) -> None:
        with contextlib.suppress(OSError):  # FileNotFoundError included
            self.fs.delete_file(path)


def fetch(step_uri: str) -> Path:
    """A verified local copy of the remote checkpoint `step_uri` (for loading on any node).

    A local copy with the same marker (rank 0 verified it while choosing) is reused.
    """
    root, name = step_uri.rstrip("/").rsplit("/", 1)
    remote, staging = RemoteCheckpoints(root), local_staging(root)
    local = staging / name
    with remote.fs.open_input_stream(f"{remote.base}/{name}/{ckpt.MARKER}") as handle:
        marker = handle.read()
    cached = local / ckpt.MARKER
    if not (cached.is_file() and cached.read_bytes() == marker):
        local = remote.download(name, staging)
    problem = ckpt.verify_checkpoint(local)
    if problem is not None:
        raise ckpt.CheckpointError(f"checkpoint {step_uri} is not usable: {problem}")
    return local


def save(root: str, params, moments, state: ckpt.TrainerState, keep: int) -> tuple[Path, str]:
    """Write a checkpoint under `root` (a path or a URI) and prune older ones.

    Returns the local directory (to report to Ray Train) and where it lives (path or URI).
    """
    if not is_bucket(root):
        path = ckpt.write_checkpoint(local_path(root), params, moments, state)
        ckpt.prune_checkpoints(local_path(root), keep)
        return path, str(path)
    staging = local_staging(root)
    path = ckpt.write_checkpoint(staging, params, moments, state)
    remote = RemoteCheckpoints(root)
    location = remote.upload(path)
    remote.prune(keep)
    _remove_all_but(staging, path)  # older steps, and copies other runs left on this node
    return path, location


def _remove_all_but(staging: Path, keep: Path) -> None:
    for entry in staging.iterdir():
        if entry != keep:
            shutil.rmtree(entry, ignore_errors=True)


def latest(root: str) -> str | None:
    """The newest valid checkpoint under `root` (a path or a URI), or None."""
    if is_bucket(root):
        return RemoteCheckpoints(root).latest_valid(local_staging(root))
    path = ckpt.latest_valid_checkpoint(local_path(root))
    return str(path) if path is not None else None


def load(location: str) -> ckpt.LoadedCheckpoint:
    """Load the checkpoint at `location` (a path or a URI) on this node."""
    return ckpt.load_checkpoint(fetch(location) if is_bucket(location) else local_path(location))
