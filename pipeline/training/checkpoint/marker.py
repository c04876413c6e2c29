"""What makes a checkpoint directory count: its `COMPLETE` marker, written last.

    <root>/step_000123/
        ...            the checkpoint's files (`shard_format`, or `consolidated`)
        COMPLETE       {"files": {name: {"bytes": n, "<algorithm>": hex}}}: every other file

A checkpoint counts only when its marker exists, lists the files of its format, and every file
it lists has its size; loading also checks every checksum, with the algorithm each entry names
(`storage.digests`: xxh3_128 for shards, sha256 for the JSON files and for checkpoints written
before). A directory without the marker is incomplete, one whose files disagree with it is
corrupt (truncated, overwritten); either is skipped with a warning naming it and the reason.
Rewriting a step sets the older copy aside as `.step_000123.swap-<id>`, which stands in for the
step while `step_000123/` is missing or broken.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from lmforge.pipeline.storage import digests

MARKER = "COMPLETE"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
LAYOUT_FILE = "layout.json"
"""Present in a sharded checkpoint (see `shard_format`): where each rank's shards hold what."""
CONSOLIDATED_FILES = (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE)
STEP_DIR = re.compile(r"^step_(\d+)$")
SWAP_COPY = re.compile(r"^\.step_(\d+)\.swap-[0-9a-f]+$")
"""A complete copy of a step held aside while that step is rewritten (here or in a bucket)."""
PENDING = re.compile(r"^\.step_(\d+)\.tmp-[0-9a-f]+$")
"""A local checkpoint being written (left behind by a write that died)."""


class CheckpointError(RuntimeError):
    """A checkpoint marked complete could not be loaded."""


def step_dir_name(step: int) -> str:
    """`step_000123`: zero-padded so that names sort by step."""
    return f"step_{step:06d}"


def step_of(name: str) -> int | None:
    """The step of a `step_*` directory or of a swap copy, else None."""
    match = STEP_DIR.match(name) or SWAP_COPY.match(name)
    return int(match.group(1)) if match else None


def swap_copy_name(name: str) -> str:
    """A fresh `.step_000123.swap-<id>` name for a copy of checkpoint `name` held aside."""
    return f".{name}.swap-{uuid.uuid4().hex[:8]}"


def pending_name(name: str) -> str:
    """A fresh `.step_000123.tmp-<id>` name for a local checkpoint being written."""
    return f".{name}.tmp-{uuid.uuid4().hex[:8]}"


def marker_text(files: dict[str, dict]) -> str:
    """The text of a `COMPLETE` marker listing files (name -> {"bytes": n, "<algorithm>": hex})."""
    return json.dumps({"files": dict(sorted(files.items()))}, indent=1)


def listed_files(marker: bytes | str) -> dict[str, dict]:
    """The files a marker's text lists, by name."""
    return json.loads(marker)["files"]


def marker_problem(marker: str | None, sizes: dict[str, int]) -> str | None:
    """Why files of these sizes (name -> bytes) do not make a checkpoint with this marker text.

    None when the marker exists, lists the files of its format (the three files of a
    consolidated checkpoint, or the trainer state and the layout of a sharded one: the layout
    names the shards, and `shard_format.Layout` checks they are listed), and every file it
    lists has its size.
    """
    if marker is None:
        return f"incomplete: no {MARKER} marker"
    try:
        expected = listed_files(marker)
        listed = {name: int(meta["bytes"]) for name, meta in expected.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"corrupt: unreadable {MARKER} marker ({exc})"
    required = (STATE_FILE, LAYOUT_FILE) if LAYOUT_FILE in listed else CONSOLIDATED_FILES
    for name in required:
        if name not in listed:
            return f"corrupt: {MARKER} does not list {name}"
    for name, size in listed.items():
        if name not in sizes:
            return f"corrupt: {name} is missing"
        if sizes[name] != size:
            return f"corrupt: {name} has {sizes[name]} bytes, {MARKER} says {size}"
    return None


def file_problem(path: Path, name: str, listed: dict) -> str | None:
    """Why the file at `path` does not match its entry in the marker (read back and hashed with
    the algorithm the entry names), or None."""
    try:
        algorithm, expected = digests.recorded_digest(listed)
    except KeyError as exc:
        return f"corrupt: {MARKER} lists {name} without a checksum ({exc})"
    if digests.digest_file(path, algorithm) != expected:
        return f"corrupt: {name} does not match its {algorithm} in {MARKER}"
    return None


def verify_checkpoint(path: str | Path, *, hashes: bool = True) -> str | None:
    """None when the local directory `path` is a complete checkpoint whose files match its
    marker, else the reason. With `hashes=False` only the marker and the file sizes are checked
    (no file is read)."""
    path = Path(path)
    marker = path / MARKER
    files = path.iterdir() if path.is_dir() else ()
    sizes = {p.name: p.stat().st_size for p in files if p.is_file()}
    problem = marker_problem(marker.read_text() if marker.is_file() else None, sizes)
    if problem is not None or not hashes:
        return problem
    for name, meta in listed_files(marker.read_text()).items():
        problem = file_problem(path / name, name, meta)
        if problem is not None:
            return problem
    return None
