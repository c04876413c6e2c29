"""Checking an artifact's files against its manifest: safe paths, sizes, sha256.

A manifest names every file with its size and sha256. Its entries are untrusted when they come
from a bucket: `safe_entry` rejects any that could land outside the artifact's directory. A cache
hit is checked with `check_local_files`: sizes always, sha256 when asked (`lmforge run --verify`)
and for any file changed after the manifest was written.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage import digests

MANIFEST = "manifest.json"


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """A manifest as it is stored, locally and in a bucket alike."""
    return json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")


def safe_entry(where: str, entry: Any) -> PurePosixPath:
    """The relative path of a manifest file entry; ArtifactError if it could escape `where`."""
    rel = entry.get("path") if isinstance(entry, dict) else None
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        raise ArtifactError(f"manifest of {where} has a bad file entry {rel!r}; do not use it")
    path = PurePosixPath(rel)
    parts = rel.split("/")
    if path.is_absolute() or any(p in ("", ".", "..") for p in parts) or rel == MANIFEST:
        raise ArtifactError(
            f"manifest of {where} lists {rel!r}, a path outside its artifact directory; "
            "the store may have been tampered with: do not use it"
        )
    if not isinstance(entry.get("bytes"), int) or not isinstance(entry.get("sha256"), str):
        raise ArtifactError(f"manifest of {where} gives no size or sha256 for {rel!r}")
    return path


def manifest_entries(where: str, manifest: dict[str, Any]) -> list[tuple[PurePosixPath, dict]]:
    """Every file entry of a manifest, each checked with `safe_entry`."""
    files = manifest.get("files")
    if not isinstance(files, list):
        raise ArtifactError(f"manifest of {where} has no file list; do not use it")
    return [(safe_entry(where, entry), entry) for entry in files]


def size_problem(rel: PurePath, size: int | None, entry: dict) -> str | None:
    if size is None:
        return f"{rel} is missing"
    if size != entry["bytes"]:
        return f"{rel} has {size} bytes, the manifest says {entry['bytes']}"
    return None


def check_local_files(root: Path, manifest: dict[str, Any], *, full: bool) -> str | None:
    """None when the files under `root` match the manifest, else what is wrong with which file.

    Sizes are always checked; sha256 of every file with `full`, else only of files modified after
    the manifest was written.
    """
    written = (root / MANIFEST).stat().st_mtime_ns
    for rel, entry in manifest_entries(str(root), manifest):
        path = root / rel
        stat = path.stat() if path.is_file() else None
        problem = size_problem(rel, stat.st_size if stat else None, entry)
        if problem:
            return problem
        if (full or stat.st_mtime_ns > written) and sha256_of(path) != entry["sha256"]:
            return f"{rel} does not match its sha256 in the manifest"
    return None


def sha256_of(path: Path) -> str:
    """The sha256 of a file of the artifact, read back (`--verify`, or a file changed since)."""
    return digests.digest_file(path, digests.ARTIFACT_ALGORITHM)
