"""Training checkpoints on disk: written atomically, verified before use, world-size independent.

    <root>/step_000123/
        model-*.safetensors, optimizer-*.safetensors, layout.json   each rank's shard (sharded:
                               see `shard_format`, written by `async_save`), or
        model.safetensors      full fp32 parameters by name           (consolidated, written by
        optimizer.safetensors  AdamW moments: exp_avg/<name>, ...      `write_checkpoint`)
        trainer_state.json     step, AdamW step, sampler position, tokens seen, loss history, ...
        COMPLETE               written last: size and checksum of every other file

A checkpoint is written into a hidden temporary directory, `COMPLETE` last, fsynced, then renamed
into place, and it counts only when `COMPLETE` exists and every file matches it. A directory
without the marker is incomplete and one whose files disagree with the marker is corrupt
(truncated, overwritten); `latest_valid_checkpoint` skips both with a warning naming them and
falls back to the previous checkpoint. Rewriting a step sets the old copy aside as
`.step_000123.swap-<id>` before the new one is renamed in, and deletes it only after; a swap copy
stands in for its step while `step_000123/` is missing or broken, so a crash at any moment leaves
a complete checkpoint of that step or an earlier one. Pruning trusts a kept checkpoint by its
marker and file sizes; loading checks every checksum (`digests`). A checkpoint that passes
that check but cannot be loaded (bad tensors, a different model) raises `CheckpointError`: it is
never silently replaced by a fresh start.
Tensors are read with safetensors and JSON only, never with pickle.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from lmforge.durable import fsync_dir, write_atomic
from lmforge.pipeline.storage import digests
from lmforge.pipeline.storage.durable import fsync_tree

MARKER = "COMPLETE"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
LAYOUT_FILE = "layout.json"
"""Present in a sharded checkpoint (see `shard_format`): where each rank's shards hold what."""
CONSOLIDATED_FILES = (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE)
_STEP_DIR = re.compile(r"^step_(\d+)$")
SWAP_COPY = re.compile(r"^\.step_(\d+)\.swap-[0-9a-f]+$")
"""A complete copy of a step held aside while that step is rewritten (here or in a bucket)."""


class CheckpointError(RuntimeError):
    """A checkpoint marked complete could not be loaded."""


@dataclass(kw_only=True, slots=True)
class TrainerState:
    """Everything besides tensors that a resumed run needs to continue exactly."""

    step: int
    """Optimizer steps done."""
    adam_step: int
    """AdamW's own update count (bias correction); equals `step` unless steps were skipped."""
    sampler_position: int
    """Next unread position of the global window order (see `sampler`)."""
    tokens_seen: int
    """Training tokens consumed so far, over all workers."""
    seed: int
    """Seed of the run: the data order and the per-step dropout seeds derive from it."""
    n_windows: int
    """Windows in the training split when the checkpoint was written."""
    world_size: int
    """Workers of the run that wrote it (informational: resuming on another count is exact)."""
    losses: list[float] = field(default_factory=list)
    """Mean training loss of every step 1..step, for the loss curve."""
    model_config: dict[str, Any] = field(default_factory=dict)
    """The model config the tensors belong to."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        return cls(**json.loads(text))


@dataclass(slots=True)
class LoadedCheckpoint:
    """The content of one checkpoint directory."""

    path: Path
    params: dict[str, torch.Tensor]
    moments: dict[str, torch.Tensor]
    state: TrainerState


def step_dir_name(step: int) -> str:
    """`step_000123`: zero-padded so that names sort by step."""
    return f"step_{step:06d}"


def write_checkpoint(
    root: str | Path,
    params: dict[str, torch.Tensor],
    moments: dict[str, torch.Tensor],
    state: TrainerState,
) -> Path:
    """Write `root/step_<state.step>` atomically and return its path (replaces an older copy)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(state.step)
    tmp = root / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        save_file(_contiguous(params), str(tmp / MODEL_FILE))
        save_file(_contiguous(moments), str(tmp / OPTIMIZER_FILE))
        (tmp / STATE_FILE).write_text(state.to_json())
        _write_marker(tmp)
        fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    move_into_place(tmp, final)
    return final


def swap_copy_name(name: str) -> str:
    """A fresh `.step_000123.swap-<id>` name for a copy of checkpoint `name` held aside."""
    return f".{name}.swap-{uuid.uuid4().hex[:8]}"


def move_into_place(new: Path, final: Path) -> None:
    """Rename `new` to `final`; an older `final` is set aside first and deleted only after.

    If the swap fails, the older copy is put back; if the process dies during it, the set-aside
    copy stands in for the step (see `list_checkpoints`).
    """
    root = final.parent
    aside = root / swap_copy_name(final.name) if final.exists() else None
    try:
        if aside is not None:  # a restarted attempt recomputed the same step
            final.rename(aside)
        new.rename(final)
        fsync_dir(root)
    except BaseException:
        if aside is not None and not final.exists():
            aside.rename(final)
        shutil.rmtree(new, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def verify_checkpoint(path: str | Path, *, hashes: bool = True) -> str | None:
    """None when `path` is a complete checkpoint whose files match its marker, else the reason.

    With `hashes=False` only the marker and the file sizes are checked (no file is read).
    """
    path = Path(path)
    marker = path / MARKER
    files = path.iterdir() if path.is_dir() else ()
    sizes = {p.name: p.stat().st_size for p in files if p.is_file()}
    problem = marker_problem(marker.read_text() if marker.is_file() else None, sizes)
    if problem is not None or not hashes:
        return problem
    for name, meta in json.loads(marker.read_text())["files"].items():
        problem = file_problem(path / name, name, meta)
        if problem is not None:
            return problem
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
        expected = json.loads(marker)["files"]
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


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every `step_*` directory and swap copy under `root`, valid or not.

    Newest step first; for one step, `step_*` before its swap copies.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name) or SWAP_COPY.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), not child.name.startswith("."), child))
    return [(step, path) for step, _, path in sorted(found, reverse=True)]


def latest_valid_checkpoint(root: str | Path) -> Path | None:
    """The newest checkpoint under `root` that passes `verify_checkpoint`, or None.

    Every newer one that fails is skipped with a warning naming it and the reason.
    """
    for _, path in list_checkpoints(root):
        problem = verify_checkpoint(path)
        if problem is None:
            return path
        warnings.warn(f"skipping checkpoint {path}: {problem}", stacklevel=2)
    return None


def load_checkpoint(path: str | Path) -> LoadedCheckpoint:
    """Read a verified checkpoint; raises CheckpointError naming it if that fails."""
    path = Path(path)
    problem = verify_checkpoint(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} is not usable: {problem}")
    try:
        params = load_file(str(path / MODEL_FILE))
        moments = load_file(str(path / OPTIMIZER_FILE))
        state = TrainerState.from_json((path / STATE_FILE).read_text())
    except (OSError, ValueError, TypeError, KeyError, RuntimeError, SafetensorError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is marked complete but cannot be loaded: {exc}. "
            "Delete that directory to resume from the previous checkpoint."
        ) from exc
    return LoadedCheckpoint(path=path, params=params, moments=moments, state=state)


def prune_checkpoints(root: str | Path, keep: int) -> list[Path]:
    """Delete all but the `keep` newest complete checkpoints, and leftovers of interrupted writes.

    A checkpoint is kept only once its marker and file sizes check out (no file is re-hashed),
    so a broken newer one never costs an older good one. Call it from the run's only writer,
    after a write: a hidden temporary directory left then belongs to a write that died.
    Incomplete or corrupt `step_*` directories are kept for inspection (resuming skips them).
    """
    root = Path(root)
    removed: list[Path] = []
    kept: set[int] = set()
    for step, path in list_checkpoints(root):
        complete = verify_checkpoint(path, hashes=False) is None
        if complete and step not in kept and len(kept) < max(keep, 1):
            kept.add(step)
        elif complete or path.name.startswith("."):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if root.is_dir():
        for leftover in root.glob(".step_*.tmp-*"):
            shutil.rmtree(leftover, ignore_errors=True)
    return removed


def marker_text(files: dict[str, dict]) -> str:
    """The text of a `COMPLETE` marker listing files (name -> {"bytes": n, "<algorithm>": hex},
    see `digests`)."""
    return json.dumps({"files": dict(sorted(files.items()))}, indent=1)


def _write_marker(directory: Path) -> None:
    files = {
        p.name: {"bytes": p.stat().st_size, digests.SHA256: digests.digest_file(p, digests.SHA256)}
        for p in sorted(directory.iterdir())
        if p.is_file()
    }
    write_marker(directory, marker_text(files))


def write_marker(directory: Path, text: str) -> None:
    """Write `COMPLETE` into `directory` atomically and durably (the last file of a checkpoint)."""
    write_atomic(directory / MARKER, text)


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous() for k, v in tensors.items()}
