"""The artifact store on an S3-compatible bucket (or any pyarrow filesystem URI).

Same contract as the local store. Tasks on any node write the artifact's files straight into the
bucket through `ctx.output` (`artifact_output`: multipart uploads, size and checksums computed on
the way) under `<uri>/<stage>/<key>/<attempt>/`; the stage's own small files are staged locally
and uploaded in parallel at the commit. The commit then writes `<uri>/<stage>/<key>/manifest.json`
(whose `data_prefix` names the attempt) from those entries, without reading the data again:
a reader that sees a manifest sees a complete artifact, and objects no manifest names are
ignored. The attempt is derived from the key and the artifact committed before, so an
interrupted run's resumed stage writes to the same place, while a rerun of a committed key never
touches the files its current manifest names.

Readers open inputs lazily (`input_artifact`): files are fetched on first read into the
node-local cache (`node_cache`), block by block, each verified against the manifest. Manifest
entries are untrusted: a path that could land outside its artifact is refused. The bucket is
reached through `bucket_files` (credentials from the environment).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import ArtifactError, LmforgeError
from lmforge.pipeline.storage import digests, temporaries
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.bucket_files import BucketFiles
from lmforge.pipeline.storage.digests import ARTIFACT_ALGORITHM
from lmforge.pipeline.storage.file_entries import DEFAULT_BLOCK_BYTES
from lmforge.pipeline.storage.input_artifact import InputPath, RemoteArtifact
from lmforge.pipeline.storage.integrity import (
    MANIFEST,
    manifest_bytes,
    manifest_entries,
    size_problem,
)
from lmforge.pipeline.storage.node_cache import CacheConfig
from lmforge.pipeline.storage.transfers import TransferProgress

UPLOADS_AT_ONCE = 8
log = logging.getLogger("lmforge")


class RemoteArtifactStore:
    """Committed artifacts by stage and key under a filesystem URI such as s3://bucket/store."""

    def __init__(
        self, uri: str, cache: CacheConfig, block_bytes: int = DEFAULT_BLOCK_BYTES
    ) -> None:
        self.uri = uri.rstrip("/")
        self.files = BucketFiles(self.uri)
        self.cache = cache
        self.block_bytes = block_bytes
        self._attempts: dict[Path, tuple[str, str, str]] = {}
        """Staging directory -> (stage, key, attempt) of each artifact being made here."""
        self._held: list[RemoteArtifact] = []

    @property
    def cache_dir(self) -> Path:
        return Path(self.cache.dir)

    def check(self) -> None:
        """Fail with one clear line when the bucket or prefix cannot be reached."""
        import pyarrow.fs as pafs

        bucket = self.files.base.split("/", 1)[0]
        try:
            info = self.files.fs.get_file_info(bucket)
        except OSError as exc:
            raise LmforgeError(f"cannot reach the artifact store {self.uri}: {exc}") from exc
        if info.type == pafs.FileType.NotFound:
            raise LmforgeError(
                f"bucket {bucket!r} of the artifact store {self.uri} does not exist; create it "
                "or fix cluster.store_uri"
            )

    def path(self, stage: str, key: str) -> str:
        return f"{self.uri}/{stage}/{key}"

    def manifest(self, stage: str, key: str) -> dict[str, Any] | None:
        try:
            data = self.files.read_bytes(f"{stage}/{key}/{MANIFEST}")
            return None if data is None else json.loads(data.decode("utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"cannot read manifest of {self.path(stage, key)}: {exc}") from exc

    def exists(self, stage: str, key: str) -> bool:
        return self.manifest(stage, key) is not None

    def data_uri(self, stage: str, key: str, manifest: dict[str, Any]) -> str:
        """Where the files of a committed artifact are (its attempt's prefix)."""
        return self.files.uri(self._data_rel(stage, key, manifest))

    def _data_rel(self, stage: str, key: str, manifest: dict[str, Any]) -> str:
        prefix = manifest.get("data_prefix") or ""
        if not isinstance(prefix, str) or "/" in prefix or prefix in (".", ".."):
            raise ArtifactError(f"manifest of {self.path(stage, key)} has a bad data_prefix")
        return f"{stage}/{key}/{prefix}" if prefix else f"{stage}/{key}"

    def verify(self, stage: str, key: str, *, full: bool = False) -> str | None:
        """None when the bucket holds every file of the manifest, else what is wrong.

        Sizes come from one listing of the artifact's prefix; sha256 (streamed, nothing
        written) only with `full`.
        """
        manifest = self.manifest(stage, key)
        if manifest is None:
            return "no manifest"
        try:
            entries = manifest_entries(self.path(stage, key), manifest)
            data = self._data_rel(stage, key, manifest)
        except ArtifactError as exc:
            return str(exc)
        try:
            sizes = self.files.sizes(data, recursive=True)
            for rel, entry in entries:
                problem = size_problem(rel, sizes.get(str(rel)), entry)
                if problem is None and full:
                    with self.files.open_read(f"{data}/{rel}") as src:
                        if digests.digest_stream(src, ARTIFACT_ALGORITHM)[0] != entry["sha256"]:
                            problem = f"{rel} does not match its sha256 in the manifest"
                if problem:
                    return problem
        except OSError as exc:
            raise ArtifactError(f"cannot check {self.path(stage, key)}: {exc}") from exc
        return None

    def begin(self, stage: str, key: str) -> Path:
        """A local staging directory for the files the stage writes itself; its tasks write
        through `output(tmp)` straight into the bucket."""
        tmp = self.cache_dir / "staging" / stage / f"{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        temporaries.claim(tmp)
        current = self.manifest(stage, key) or {}
        seed = f"{key}:{current.get('data_prefix', '')}:{current.get('finished_at', '')}"
        self._attempts[tmp] = (stage, key, "a" + hashlib.sha256(seed.encode()).hexdigest()[:12])
        return tmp

    def output(self, tmp: Path) -> ArtifactOutput:
        stage, key, attempt = self._attempts[tmp]
        return ArtifactOutput(f"{self.path(stage, key)}/{attempt}", self.block_bytes)

    def commit(
        self,
        tmp: Path,
        stage: str,
        key: str,
        manifest: dict[str, Any],
        entries: Sequence[dict[str, Any]] = (),
        *,
        rebuild: bool = False,
    ) -> str:
        """Upload the staged files, check the tasks' files are all there, then publish the
        manifest. As locally, an intact artifact committed meanwhile is kept (this attempt's
        staging dropped) unless this is a `rebuild`, whose earlier manifest is kept under
        `.replaced/`."""
        if not rebuild and self.verify(stage, key) is None:
            self.abort(tmp)
            return self.path(stage, key)
        output = self.output(tmp)
        temporaries.release(tmp)
        own = self._upload_staged(tmp, output, f"uploading {stage}/{key}")
        files = sorted([*own, *entries], key=lambda e: e["path"])
        self._check_written(output, files)
        previous = self.manifest(stage, key)
        if previous is not None:
            stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
            kept = dict(previous, data_uri=self.data_uri(stage, key, previous))
            replaced = f"{stage}/.replaced/{key}-{stamp}/{MANIFEST}"
            self.files.write_bytes(replaced, manifest_bytes(kept))
        manifest = dict(manifest, files=files, data_prefix=self._attempts.pop(tmp)[2])
        self.files.write_bytes(f"{stage}/{key}/{MANIFEST}", manifest_bytes(manifest))
        shutil.rmtree(tmp, ignore_errors=True)
        return self.path(stage, key)

    def _upload_staged(self, tmp: Path, output: ArtifactOutput, what: str) -> list[dict]:
        paths = sorted(
            p
            for p in tmp.rglob("*")
            if p.is_file() and p.relative_to(tmp).as_posix() not in temporaries.ENGINE_FILES
        )
        progress = TransferProgress(what, sum(p.stat().st_size for p in paths))

        def upload(path: Path) -> dict:
            return output.put(path, path.relative_to(tmp).as_posix(), progress)

        with ThreadPoolExecutor(UPLOADS_AT_ONCE) as pool:
            uploaded = list(pool.map(upload, paths))
        progress.finish()
        return uploaded

    def _check_written(self, output: ArtifactOutput, files: list[dict]) -> None:
        """Every file the manifest will name is in the bucket with its size (one listing)."""
        sizes = output.files().sizes(recursive=True)
        for entry in files:
            problem = size_problem(Path(entry["path"]), sizes.get(entry["path"]), entry)
            if problem:
                raise ArtifactError(f"{output.root}: {problem}; the stage's writer lost a file")
        unnamed = sorted(set(sizes) - {e["path"] for e in files})
        if unnamed:  # an interrupted attempt's leftovers, or entries a stage did not hand over
            log.warning(
                "%s: %d file(s) no manifest entry names are left out of the artifact, e.g. %s "
                "(a stage passes its tasks' entries to ctx.add_files)",
                output.root,
                len(unnamed),
                unnamed[0],
            )

    def abort(self, tmp: Path) -> None:
        """Drop the local staging; the bucket keeps what tasks wrote for a resumed run."""
        self._attempts.pop(tmp, None)
        shutil.rmtree(tmp, ignore_errors=True)

    def release_inputs(self) -> None:
        """Nothing to drop: an input read from a bucket is pinned by the manifest it was opened
        with (a rebuild writes its files under another data prefix, and keeps the old ones)."""

    def sweep_temporaries(self) -> int:
        """Remove staging directories whose owner is dead (see `temporaries`); how many."""
        staging = self.cache_dir / "staging"
        if not staging.is_dir():
            return 0
        return temporaries.sweep(staging.glob("*/*"))

    def local_path(self, stage: str, key: str) -> Path:
        """Where a committed artifact's files land on this node once read (the node cache)."""
        return self.cache_dir / "files" / stage / key

    def open_input(self, stage: str, key: str, manifest: dict[str, Any] | None = None):
        """A committed artifact as an `InputPath`: files fetched on first read."""
        manifest = manifest if manifest is not None else self.manifest(stage, key)
        if manifest is None:
            raise ArtifactError(
                f"{self.path(stage, key)} has no manifest: not a committed artifact"
            )
        location = self.path(stage, key)
        artifact = RemoteArtifact(
            location, self.data_uri(stage, key, manifest), stage, key, manifest, self.cache
        )
        return InputPath(artifact)

    def materialize(self, stage: str, key: str) -> Path:
        """Every file of a committed artifact in the node cache, verified: its local directory
        (held from eviction while this store object lives)."""
        root = self.open_input(stage, key)
        self._held.append(root.artifact)
        return root.local_path()
