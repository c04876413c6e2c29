"""Consolidated checkpoints at a location that is a path or a bucket URI: save, find the newest,
load, on any node.

In a bucket, `<uri>/step_000123/` holds the same files as a local checkpoint (`consolidated`),
and `COMPLETE` is uploaded last, so a reader that sees the marker sees every file (an upload that
died leaves a directory without it, which is skipped). Nothing renames in a bucket, so rewriting
a step first uploads a complete swap copy that stands in for the step meanwhile; pruning keeps a
checkpoint only once its marker and file sizes check out (`store.CheckpointStore`). Rank 0 writes
a checkpoint into a local staging directory and uploads it; resuming downloads the chosen one
into a local staging directory on each node and verifies every file against the marker's sha256
before loading. Credentials come from the environment, as for the artifact store.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from lmforge.pipeline.storage.location import is_bucket, local_path
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.store import CheckpointStore, local_staging

__all__ = ["fetch", "latest", "load", "local_staging", "save"]


def fetch(step_uri: str) -> Path:
    """A verified local copy of the checkpoint `step_uri` in a bucket (for loading on any node).

    A local copy with the same marker (rank 0 verified it while choosing) is reused.
    """
    root, name = step_uri.rstrip("/").rsplit("/", 1)
    store, staging = CheckpointStore(root), local_staging(root)
    local = staging / name
    cached = local / ckpt.MARKER
    marker = store.files.read_bytes(f"{name}/{ckpt.MARKER}")
    if not (cached.is_file() and cached.read_bytes() == marker):
        local = store.download(name, staging)
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
    store = CheckpointStore(root)
    location = store.upload(path)
    store.prune(keep)
    _remove_all_but(staging, path)  # older steps, and copies other runs left on this node
    return path, location


def _remove_all_but(staging: Path, keep: Path) -> None:
    for entry in staging.iterdir():
        if entry != keep:
            shutil.rmtree(entry, ignore_errors=True)


def latest(root: str) -> str | None:
    """The newest valid checkpoint under `root` (a path or a URI), or None.

    In a bucket each candidate is downloaded and every file checked against the marker; newer
    ones without a marker or with mismatching files are skipped with a warning.
    """
    if not is_bucket(root):
        path = ckpt.latest_valid_checkpoint(local_path(root))
        return str(path) if path is not None else None
    store, staging = CheckpointStore(root), local_staging(root)
    for _, name, marked in store.steps():
        if not marked and name.startswith("."):
            continue  # a swap copy whose upload died
        problem: str | None
        if not marked:
            problem = f"incomplete: no {ckpt.MARKER} marker"
        else:
            problem = ckpt.verify_checkpoint(store.download(name, staging))
        if problem is None:
            return store.step_location(name)
        warnings.warn(f"skipping checkpoint {store.step_location(name)}: {problem}", stacklevel=2)
    return None


def load(location: str) -> ckpt.LoadedCheckpoint:
    """Load the checkpoint at `location` (a path or a URI) on this node."""
    return ckpt.load_checkpoint(fetch(location) if is_bucket(location) else local_path(location))
