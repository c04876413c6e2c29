"""The artifact store: `<workdir>/store/<stage>/<key>/`, committed atomically.

A stage writes into a temporary directory beside its final place; the runner writes
`manifest.json` last and renames the directory into place. A directory without a manifest does not
exist as far as the pipeline is concerned, so nothing half-written is ever read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import ArtifactError

MANIFEST = "manifest.json"


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


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

    def begin(self, stage: str, key: str) -> Path:
        """A fresh temporary directory where the stage writes its artifact."""
        tmp = self.root / stage / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        return tmp

    def commit(self, tmp: Path, stage: str, key: str, manifest: dict[str, Any]) -> Path:
        """Write the manifest last and rename `tmp` into place.

        An existing committed artifact is never overwritten silently: it is moved to
        `<stage>/.replaced/<key>-<time>/` first (only `rerun` asks for this).
        """
        final = self.path(stage, key)
        manifest = dict(manifest, files=describe_files(tmp))
        manifest_tmp = tmp / (MANIFEST + ".tmp")
        manifest_tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(manifest_tmp, tmp / MANIFEST)
        if final.exists():
            if (final / MANIFEST).is_file():
                replaced = (
                    self.root / stage / ".replaced" / f"{key}-{time.strftime('%Y%m%d-%H%M%S')}"
                )
                replaced.parent.mkdir(parents=True, exist_ok=True)
                os.replace(final, replaced)
            else:
                shutil.rmtree(final)  # a directory without a manifest does not exist
        os.replace(tmp, final)
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

    def sweep_temporaries(self, older_than_s: float = 0.0) -> int:
        """Remove temporary directories left by killed runs; returns how many."""
        removed = 0
        if not self.root.is_dir():
            return 0
        now = time.time()
        for tmp in self.root.glob("*/.tmp-*"):
            if now - tmp.stat().st_mtime >= older_than_s:
                shutil.rmtree(tmp, ignore_errors=True)
                removed += 1
        return removed


def open_store(store_uri: str | None, workdir: Path):
    """The local store under the workdir, or a remote one (s3://...) with a local cache."""
    if not store_uri:
        return ArtifactStore(workdir / "store")
    if "://" not in store_uri:
        return ArtifactStore(Path(store_uri).expanduser())
    from lmforge.pipeline.remote_store import RemoteArtifactStore

    return RemoteArtifactStore(store_uri, workdir / "cache")
