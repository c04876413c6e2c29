"""The artifact store: `<workdir>/store/<stage>/<key>/`, committed atomically.

A stage writes into a temporary directory beside its final place; the runner writes
`manifest.json` last, fsyncs the tree and renames the directory into place. A directory without a
manifest does not exist as far as the pipeline is concerned, so nothing half-written is ever read.
A cache hit is checked against its manifest (`verify`) before it is reused. Temporary directories
record their owner and are swept only when it is dead (see `temporaries`).
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
from lmforge.pipeline.durable import durable_replace, file_sha256, fsync_dir, fsync_tree
from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.integrity import MANIFEST, check_local_files

__all__ = ["MANIFEST", "ArtifactStore", "describe_files", "file_sha256", "open_store"]


def describe_files(root: Path) -> list[dict[str, Any]]:
    """Relative path, size and sha256 of every file under `root`, sorted."""
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel == MANIFEST:
            continue
        files.append({"path": rel, "bytes": path.stat().st_size, "sha256": file_sha256(path)})
    return files


class ArtifactStore:
    """Committed artifacts by stage and cache key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, stage: str, key: str) -> Path:
        return self.root / stage / key

    def manifest(self, stage: str, key: str) -> dict[str, Any] | None:
        """The manifest of a committed artifact, or None when there is none."""
        path = self.path(stage, key) / MANIFEST
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
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
        """A fresh temporary directory where the stage writes its artifact, claimed by us."""
        tmp = self.root / stage / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        temporaries.claim(tmp)
        return tmp

    def commit(self, tmp: Path, stage: str, key: str, manifest: dict[str, Any]) -> Path:
        """Write the manifest last, fsync everything and rename `tmp` into place.

        An existing committed artifact is never overwritten silently: it is moved to
        `<stage>/.replaced/<key>-<time>/` first (a rerun, or a cached copy found corrupt).
        """
        final = self.path(stage, key)
        temporaries.release(tmp)
        manifest = dict(manifest, files=describe_files(tmp))
        manifest_tmp = tmp / (MANIFEST + ".tmp")
        manifest_tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(manifest_tmp, tmp / MANIFEST)
        fsync_tree(tmp)
        if final.exists():
            if (final / MANIFEST).is_file():
                stamp = time.strftime("%Y%m%d-%H%M%S")
                replaced = self.root / stage / ".replaced" / f"{key}-{stamp}-{uuid.uuid4().hex[:4]}"
                replaced.parent.mkdir(parents=True, exist_ok=True)
                durable_replace(final, replaced)
            else:
                shutil.rmtree(final)  # a directory without a manifest does not exist
        durable_replace(tmp, final)
        fsync_dir(self.root)
        return final

    def local_path(self, stage: str, key: str) -> Path:
        """Where a committed artifact is readable on this node."""
        return self.path(stage, key)

    def materialize(self, stage: str, key: str) -> Path:
        """The local directory of a committed artifact (it already is local here)."""
        path = self.path(stage, key)
        if not (path / MANIFEST).is_file():
            raise ArtifactError(f"{path} has no manifest: not a committed artifact")
        return path

    def check(self) -> None:
        """Nothing to reach: the store is a local directory."""

    def abort(self, tmp: Path) -> None:
        """Remove a temporary directory after a failure."""
        shutil.rmtree(tmp, ignore_errors=True)

    def sweep_temporaries(self) -> int:
        """Remove temporary directories whose owner is dead (see `temporaries`); how many."""
        if not self.root.is_dir():
            return 0
        return temporaries.sweep(self.root.glob("*/.tmp-*"))


def open_store(store_uri: str | None, workdir: Path):
    """The local store under the workdir, or a remote one (s3://...) with a local cache."""
    if not store_uri:
        return ArtifactStore(workdir / "store")
    if "://" not in store_uri:
        return ArtifactStore(Path(store_uri).expanduser())
    from lmforge.pipeline.remote_store import RemoteArtifactStore

    return RemoteArtifactStore(store_uri, workdir / "cache")
