"""The artifact store on an S3-compatible bucket (or any pyarrow filesystem URI).

Same contract as the local store: a stage writes into a local temporary directory; commit
uploads every file under `<uri>/<stage>/<key>/` and writes `manifest.json` last, so a reader that
sees a manifest sees a complete artifact (objects without one are ignored). Inputs are
materialised into a local cache on the node that runs a stage, since stages read files with
numpy memory maps and pyarrow. Manifest entries are untrusted: a path that could land outside the
cache is refused, and every downloaded file is checked against its size and sha256 while it
streams in; only a complete, verified copy is renamed into the cache. Credentials come from the
environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL` for S3-compatible
servers), never from config.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from lmforge.pipeline import temporaries
from lmforge.pipeline.durable import fsync_tree
from lmforge.pipeline.errors import ArtifactError, LmforgeError
from lmforge.pipeline.integrity import (
    check_local_files,
    copy_verified,
    manifest_entries,
    size_problem,
    stream_sha256,
)
from lmforge.pipeline.store import MANIFEST, describe_files


def _filesystem(uri: str):
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError) as exc:
        raise LmforgeError(f"cannot open the artifact store {uri}: {exc}") from exc


class RemoteArtifactStore:
    """Committed artifacts by stage and key under a filesystem URI such as s3://bucket/store."""

    def __init__(self, uri: str, cache_dir: str | Path) -> None:
        self.uri = uri.rstrip("/")
        self.fs, self.base = _filesystem(self.uri)
        self.cache_dir = Path(cache_dir)

    def check(self) -> None:
        """Fail with one clear line when the bucket or prefix cannot be reached."""
        import pyarrow.fs as pafs

        bucket = self.base.split("/", 1)[0]
        try:
            info = self.fs.get_file_info(bucket)
        except OSError as exc:
            raise LmforgeError(f"cannot reach the artifact store {self.uri}: {exc}") from exc
        if info.type == pafs.FileType.NotFound:
            raise LmforgeError(
                f"bucket {bucket!r} of the artifact store {self.uri} does not exist; create it "
                "or fix cluster.store_uri"
            )

    def path(self, stage: str, key: str) -> str:
        return f"{self.uri}/{stage}/{key}"

    def _key(self, stage: str, key: str, name: str = "") -> str:
        return "/".join(p for p in (self.base, stage, key, name) if p)

    def manifest(self, stage: str, key: str) -> dict[str, Any] | None:
        try:
            with self.fs.open_input_stream(self._key(stage, key, MANIFEST)) as handle:
                return json.loads(handle.read().decode("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as exc:
            if "NoSuchKey" in str(exc) or "not found" in str(exc).lower():
                return None
            raise ArtifactError(f"cannot read manifest of {self.path(stage, key)}: {exc}") from exc

    def exists(self, stage: str, key: str) -> bool:
        return self.manifest(stage, key) is not None

    def verify(self, stage: str, key: str, *, full: bool = False) -> str | None:
        """None when the bucket holds every file of the manifest, else what is wrong.

        Sizes come from one listing of the artifact's prefix; sha256 (streamed, nothing
        written) only with `full`.
        """
        import pyarrow.fs as pafs

        manifest = self.manifest(stage, key)
        if manifest is None:
            return "no manifest"
        prefix = self._key(stage, key)
        try:
            entries = manifest_entries(self.path(stage, key), manifest)
        except ArtifactError as exc:
            return str(exc)
        try:
            listing = self.fs.get_file_info(pafs.FileSelector(prefix, recursive=True))
            sizes = {i.path[len(prefix) + 1 :]: i.size for i in listing if i.is_file}
            for rel, entry in entries:
                problem = size_problem(rel, sizes.get(str(rel)), entry)
                if problem is None and full:
                    with self.fs.open_input_stream(self._key(stage, key, str(rel))) as src:
                        if stream_sha256(src)[0] != entry["sha256"]:
                            problem = f"{rel} does not match its sha256 in the manifest"
                if problem:
                    return problem
        except OSError as exc:
            raise ArtifactError(f"cannot check {self.path(stage, key)}: {exc}") from exc
        return None

    def begin(self, stage: str, key: str) -> Path:
        tmp = self.cache_dir / ".staging" / stage / f"{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        temporaries.claim(tmp)
        return tmp

    def commit(self, tmp: Path, stage: str, key: str, manifest: dict[str, Any]) -> str:
        """Upload the files, then the manifest; an earlier artifact is kept under .replaced/."""
        import pyarrow.fs as pafs

        if self.fs.get_file_info(self._key(stage, key, MANIFEST)).type == pafs.FileType.File:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            self._copy_tree(self._key(stage, key), self._key(stage, ".replaced", f"{key}-{stamp}"))
            self.fs.delete_file(self._key(stage, key, MANIFEST))
        temporaries.release(tmp)
        manifest = dict(manifest, files=describe_files(tmp))
        for entry in manifest["files"]:
            self._upload(tmp / entry["path"], self._key(stage, key, entry["path"]))
        body = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
        with self.fs.open_output_stream(self._key(stage, key, MANIFEST)) as handle:
            handle.write(body)
        (tmp / MANIFEST).write_bytes(body)
        self._cache(tmp, stage, key)
        return self.path(stage, key)

    def abort(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    def sweep_temporaries(self) -> int:
        """Remove staging directories whose owner is dead (see `temporaries`); how many."""
        staging = self.cache_dir / ".staging"
        if not staging.is_dir():
            return 0
        return temporaries.sweep([*staging.glob("*/*"), *staging.glob("download-*")])

    def local_path(self, stage: str, key: str) -> Path:
        """Where a committed artifact is readable on this node (the local cache)."""
        return self.cache_dir / stage / key

    def materialize(self, stage: str, key: str) -> Path:
        """A local copy of a committed artifact, downloaded once per node, verified, atomically.

        A cached copy whose sizes disagree with its manifest is set aside and downloaded again.
        """
        local = self.cache_dir / stage / key
        if (local / MANIFEST).is_file():
            manifest = json.loads((local / MANIFEST).read_text(encoding="utf-8"))
            if check_local_files(local, manifest, full=False) is None:
                return local
            self._set_aside(local)
        manifest = self.manifest(stage, key)
        if manifest is None:
            raise ArtifactError(
                f"{self.path(stage, key)} has no manifest: not a committed artifact"
            )
        entries = manifest_entries(self.path(stage, key), manifest)
        tmp = self.cache_dir / ".staging" / f"download-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            temporaries.claim(tmp)
            for rel, entry in entries:
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with self.fs.open_input_stream(self._key(stage, key, str(rel))) as src:
                    copy_verified(src, target, rel, entry)
            temporaries.release(tmp)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            fsync_tree(tmp)
        except ArtifactError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ArtifactError(
                f"artifact {self.path(stage, key)} is corrupt in the store: {exc}; "
                f"recompute it with `lmforge rerun {stage}`"
            ) from exc
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp, local)
        except OSError:  # another task on this node won the race: its copy is as good
            shutil.rmtree(tmp, ignore_errors=True)
        return local

    def _set_aside(self, local: Path) -> None:
        """Move a damaged cached copy to `.corrupt/` (kept for inspection, never used)."""
        aside = (
            self.cache_dir / ".corrupt" / f"{local.parent.name}-{local.name}-{uuid.uuid4().hex[:6]}"
        )
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.replace(local, aside)

    def _cache(self, tmp: Path, stage: str, key: str) -> None:
        local = self.cache_dir / stage / key
        shutil.rmtree(local, ignore_errors=True)
        local.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, local)

    def _upload(self, source: Path, target: str) -> None:
        with open(source, "rb") as src, self.fs.open_output_stream(target) as dst:
            shutil.copyfileobj(src, dst, 1 << 22)

    def _copy_tree(self, source: str, target: str) -> None:
        import pyarrow.fs as pafs

        for info in self.fs.get_file_info(pafs.FileSelector(source, recursive=True)):
            if info.type == pafs.FileType.File:
                self.fs.copy_file(info.path, target + info.path[len(source) :])
