"""The artifact store: `<workdir>/store/<stage>/<key>/`, committed atomically and only once.

A stage and its tasks (on any node: the store path is shared) write into a temporary directory
beside the artifact's final place, `.tmp-<key>`; each file written through `ctx.output`
(`artifact_output`) comes with its manifest entry, computed while it was written. The commit
writes `manifest.json` from those entries (hashing only the files the stage wrote without one),
fsyncs and renames the directory into place. A directory without a manifest does not exist as far
as the pipeline is concerned, so nothing half-written is ever read. A cache hit is checked against
its manifest (`verify`) before it is reused. Temporary directories record their owner and are
swept only when it is dead (see `temporaries`); one marked resumable by its stage is kept, and the
next run of the same key continues in it.

A stage reads each input through a *pinned* copy (`open_input`): hard links to the files of the
committed artifact, its manifest included, in `<stage>/.tmp-read-<id>/<key>/`, made relative to
the artifact's directory as it was opened. A rebuild under the same key (a rerun; a damaged
copy; `sample_index` grown for more windows) moves that directory to `.replaced/` and puts
another in its place; the reader keeps reading the copy it opened, every file of one version,
until its stage ends (`release_inputs`). A pin records its owner like a temporary directory, so
the pins of a reader that died are swept with them. Where the file system has no hard links,
the stage reads the artifact's directory in place.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmforge.durable import PARTIAL, fsync_dir, is_partial
from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage import temporaries
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES, describe_file
from lmforge.pipeline.storage.integrity import (
    MANIFEST,
    check_local_files,
    manifest_bytes,
    size_problem,
)
from lmforge.pipeline.storage.local_files import LocalFiles
from lmforge.pipeline.storage.location import is_bucket, local_path
from lmforge.pipeline.storage.settings import StoreSettings

__all__ = ["MANIFEST", "ArtifactStore", "describe_files", "open_store"]

log = logging.getLogger("lmforge")

PIN_PREFIX = ".tmp-read-"
"""A pinned copy of an input (`open_input`): a temporary directory, swept when its owner died."""
PIN_ATTEMPTS = 40
PIN_PAUSE_S = 0.05
NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV)


def describe_files(
    root: Path, known: dict[str, dict] | None = None, block_bytes: int = DEFAULT_BLOCK_BYTES
) -> list[dict[str, Any]]:
    """The manifest entries of every file under `root`, sorted: those in `known` (entries the
    writers computed) as given, after a size check; the others read and hashed."""
    known = dict(known or {})
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel in temporaries.ENGINE_FILES or is_partial(path):
            continue
        entry = known.pop(rel, None)
        if entry is None:
            files.append(describe_file(path, rel, block_bytes))
            continue
        problem = size_problem(Path(rel), path.stat().st_size, entry)
        if problem:
            raise ArtifactError(f"{root}: {problem}: a task's file changed after it was written")
        files.append(entry)
    if known:
        raise ArtifactError(f"{root}: {sorted(known)[0]} was reported written but is missing")
    return files


class ArtifactStore:
    """Committed artifacts by stage and cache key."""

    def __init__(self, root: str | Path, block_bytes: int = DEFAULT_BLOCK_BYTES) -> None:
        self.root = Path(root)
        self.files = LocalFiles(self.root)
        self.block_bytes = block_bytes
        self._pins: list[Path] = []

    def path(self, stage: str, key: str) -> Path:
        return self.root / stage / key

    def manifest(self, stage: str, key: str) -> dict[str, Any] | None:
        """The manifest of a committed artifact, or None when there is none."""
        path = self.path(stage, key) / MANIFEST
        try:
            data = self.files.read_bytes(f"{stage}/{key}/{MANIFEST}")
            return None if data is None else json.loads(data.decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(
                f"corrupt manifest {path}: {exc}; delete {path.parent} to recompute it"
            ) from exc

    def exists(self, stage: str, key: str) -> bool:
        return self.manifest(stage, key) is not None

    def verify(self, stage: str, key: str, *, full: bool = False) -> str | None:
        """None when the committed artifact's files match its manifest, else what is wrong.

        Sizes always; sha256 with `full` or for files modified after the manifest.
        """
        manifest = self.manifest(stage, key)
        if manifest is None:
            return "no manifest"
        try:
            return check_local_files(self.path(stage, key), manifest, full=full)
        except ArtifactError as exc:
            return str(exc)

    def begin(self, stage: str, key: str) -> Path:
        """The temporary directory where the stage writes its artifact, claimed by us: the one a
        dead run of the same key marked resumable, else a fresh one."""
        tmp = self.root / stage / f".tmp-{key}"
        if tmp.is_dir():
            if temporaries.held_by_live_owner(tmp):  # another run of the same key: keep away
                tmp = tmp.with_name(f"{tmp.name}-{uuid.uuid4().hex[:8]}")
            elif not _resumable(tmp):
                shutil.rmtree(tmp)
        tmp.mkdir(parents=True, exist_ok=True)
        temporaries.claim(tmp)
        return tmp

    def output(self, tmp: Path) -> ArtifactOutput:
        """Where the stage's tasks write the artifact's files: `tmp` itself (a shared path)."""
        return ArtifactOutput(str(tmp), self.block_bytes)

    def commit(
        self,
        tmp: Path,
        stage: str,
        key: str,
        manifest: dict[str, Any],
        entries: Sequence[dict[str, Any]] = (),
        *,
        rebuild: bool = False,
    ) -> Path:
        """Write the manifest last, fsync everything and rename `tmp` into place.

        `entries`: manifest entries of the files the tasks wrote (`ctx.add_files`); only the
        other files are read to hash them. A commit adds an artifact that is not there: an
        intact one committed meanwhile (by a run that held the key's lease before this one)
        is kept and `tmp` dropped. Only a `rebuild` (a rerun, a copy found corrupt or too small,
        under the key's lease) replaces one, and never silently: the old copy is moved to
        `<stage>/.replaced/<key>-<time>-<id>/` first.
        """
        final = self.path(stage, key)
        if not rebuild and self.verify(stage, key) is None:
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        temporaries.release(tmp)
        (tmp / temporaries.RESUMABLE_MARKER).unlink(missing_ok=True)
        for partial in [p for p in tmp.rglob(f".*{PARTIAL}*") if p.is_file()]:
            partial.unlink()  # a task's unfinished file: never part of the artifact
        known = {e["path"]: e for e in entries}
        manifest = dict(manifest, files=describe_files(tmp, known, self.block_bytes))
        pending = tmp.relative_to(self.root).as_posix()
        self.files.write_bytes(f"{pending}/{MANIFEST}", manifest_bytes(manifest))
        replaced = None
        if (final / MANIFEST).is_file():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            replaced = f"{stage}/.replaced/{key}-{stamp}-{uuid.uuid4().hex[:4]}"
        elif final.exists():
            shutil.rmtree(final)  # a directory without a manifest does not exist
        self.files.publish(pending, f"{stage}/{key}", set_aside=replaced)
        fsync_dir(self.root)
        return final

    def local_path(self, stage: str, key: str) -> Path:
        """Where a committed artifact is readable on this node."""
        return self.path(stage, key)

    def open_input(self, stage: str, key: str, manifest: dict[str, Any] | None = None) -> Path:
        """A committed artifact for a stage to read: a pinned copy of it as it is now (see the
        module doc; its own `manifest.json` says which version), kept until `release_inputs`."""
        for _ in range(PIN_ATTEMPTS):
            try:
                directory = os.open(self.path(stage, key), os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:  # between the two renames of a rebuild's commit
                time.sleep(PIN_PAUSE_S)
                continue
            try:
                return self._pin(directory, stage, key)
            except FileNotFoundError:  # the copy opened was removed meanwhile: the new one
                continue
            except OSError as exc:
                if exc.errno not in NO_HARD_LINKS:
                    raise
                log.debug("reading %s in place: no hard links there (%s)", stage, exc)
                return self.materialize(stage, key)
            finally:
                os.close(directory)
        return self.materialize(stage, key)  # no artifact there: one clear error

    def _pin(self, directory: int, stage: str, key: str) -> Path:
        """Hard links to the manifest and files of the artifact directory open as `directory`."""
        holder = self.root / stage / f"{PIN_PREFIX}{uuid.uuid4().hex[:12]}"
        pinned = holder / key
        pinned.mkdir(parents=True)
        temporaries.claim(holder)
        self._pins.append(holder)
        try:
            os.link(MANIFEST, pinned / MANIFEST, src_dir_fd=directory)
            manifest = json.loads((pinned / MANIFEST).read_bytes())
            for entry in manifest.get("files", []):
                target = pinned / entry["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(entry["path"], target, src_dir_fd=directory, follow_symlinks=False)
        except BaseException:
            self._unpin(holder)
            raise
        return pinned

    def release_inputs(self) -> None:
        """Drop the pinned copies of the inputs this store opened (their stage ended)."""
        while self._pins:
            self._unpin(self._pins[-1])

    def _unpin(self, holder: Path) -> None:
        shutil.rmtree(holder, ignore_errors=True)
        self._pins.remove(holder)

    def materialize(self, stage: str, key: str) -> Path:
        """The local directory of a committed artifact (it already is local here)."""
        path = self.path(stage, key)
        if not (path / MANIFEST).is_file():
            raise ArtifactError(f"{path} has no manifest: not a committed artifact")
        return path

    def check(self) -> None:
        """Nothing to reach: the store is a local directory."""

    def abort(self, tmp: Path) -> None:
        """Remove a temporary directory after a failure (only a killed run leaves one behind)."""
        shutil.rmtree(tmp, ignore_errors=True)

    def sweep_temporaries(self) -> int:
        """Remove temporary directories whose owner is dead (see `temporaries`); how many."""
        if not self.root.is_dir():
            return 0
        return temporaries.sweep(self.root.glob("*/.tmp-*"))


def _resumable(tmp: Path) -> bool:
    return (tmp / temporaries.RESUMABLE_MARKER).exists()


def open_store(store_uri: str | None, workdir: Path, settings: StoreSettings | None = None):
    """The local store under the workdir (or at a path, `file://` included), or one in a
    bucket (s3://...) read through the node cache."""
    settings = settings or StoreSettings.defaults(workdir)
    if not store_uri:
        return ArtifactStore(workdir / "store", settings.block_bytes)
    if not is_bucket(store_uri):
        return ArtifactStore(local_path(store_uri), settings.block_bytes)
    from lmforge.pipeline.storage.bucket_artifact_store import RemoteArtifactStore

    return RemoteArtifactStore(store_uri, settings.cache, settings.block_bytes)
