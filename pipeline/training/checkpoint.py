"""Training checkpoints on disk: written atomically, verified before use, world-size independent.

    <root>/step_000123/
        model.safetensors      full fp32 parameters by name
        optimizer.safetensors  AdamW moments: exp_avg/<name>, exp_avg_sq/<name>
        trainer_state.json     step, AdamW step, sampler position, tokens seen, loss history, ...
        COMPLETE               written last: size and sha256 of every other file

A checkpoint is written into a hidden temporary directory, `COMPLETE` last, then renamed into
place, and it counts only when `COMPLETE` exists and every file matches it. A directory without
the marker is incomplete and one whose files disagree with the marker is corrupt (truncated,
overwritten); `latest_valid_checkpoint` skips both with a warning naming them and falls back to
the previous checkpoint. A checkpoint that passes that check but cannot be loaded (bad tensors,
a different model) raises `CheckpointError`: it is never silently replaced by a fresh start.
Tensors are read with safetensors and JSON only, never with pickle.
"""

from __future__ import annotations

import dataclasses
import json
import os
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

from lmforge.pipeline.durable import file_sha256, fsync_dir, fsync_tree

MARKER = "COMPLETE"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")


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
        if final.exists():  # a restarted attempt recomputed the same step
            stale = root / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
            final.rename(stale)
            shutil.rmtree(stale, ignore_errors=True)
        tmp.rename(final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def verify_checkpoint(path: str | Path) -> str | None:
    """None when `path` is a complete checkpoint whose files match its marker, else the reason."""
    path = Path(path)
    marker = path / MARKER
    if not marker.is_file():
        return f"incomplete: no {MARKER} marker"
    try:
        expected = json.loads(marker.read_text())["files"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"corrupt: unreadable {MARKER} marker ({exc})"
    for name in (MODEL_FILE, OPTIMIZER_FILE, STATE_FILE):
        if name not in expected:
            return f"corrupt: {MARKER} does not list {name}"
    for name, meta in expected.items():
        file = path / name
        if not file.is_file():
            return f"corrupt: {name} is missing"
        size = file.stat().st_size
        if size != meta["bytes"]:
            return f"corrupt: {name} has {size} bytes, {MARKER} says {meta['bytes']}"
        if file_sha256(file) != meta["sha256"]:
            return f"corrupt: {name} does not match its sha256 in {MARKER}"
    return None


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every `step_*` directory under `root`, newest first, valid or not."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found, reverse=True)


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
    """Delete all but the `keep` newest valid checkpoints, and leftovers of interrupted writes.

    Call it from the run's only writer, after a write: a hidden temporary directory left then
    belongs to a write that died. Incomplete or corrupt `step_*` directories are kept for
    inspection (resuming skips them with a warning).
    """
    root = Path(root)
    removed: list[Path] = []
    valid = [p for _, p in list_checkpoints(root) if verify_checkpoint(p) is None]
    for path in valid[max(keep, 1) :]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if root.is_dir():
        for pattern in (".step_*.old-*", ".step_*.tmp-*"):
            for leftover in root.glob(pattern):
                shutil.rmtree(leftover, ignore_errors=True)
    return removed


def _write_marker(directory: Path) -> None:
    files = {
        p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(directory.iterdir())
        if p.is_file()
    }
    marker_tmp = directory / f".{MARKER}.tmp"
    marker_tmp.write_text(json.dumps({"files": files}, indent=1))
    with open(marker_tmp, "rb") as f:
        os.fsync(f.fileno())
    marker_tmp.rename(directory / MARKER)


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous() for k, v in tensors.items()}
