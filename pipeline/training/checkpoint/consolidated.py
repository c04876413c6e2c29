"""Training checkpoints in the consolidated format: whole tensors in two files, world-size
independent, written atomically, verified before use.

    <root>/step_000123/
        model.safetensors      full fp32 parameters by name
        optimizer.safetensors  AdamW moments: exp_avg/<name>, exp_avg_sq/<name>
        trainer_state.json     step, AdamW step, sampler position, tokens seen, loss history, ...
        COMPLETE               written last: size and sha256 of every other file (`marker`)

Training writes sharded checkpoints (`shard_format`, `async_save`); this format is the one
before them, still read (`shard_format.Layout` reads it like a single shard) and written by the
benchmarks' reference path. A checkpoint is written into a hidden temporary directory, `COMPLETE`
last, and published by its store (`store.CheckpointStore.commit`: fsynced, renamed into place, an
older copy of the step held aside meanwhile), and it counts only when `COMPLETE` exists and every
file matches it; `latest_valid_checkpoint` skips the others with a warning naming them and falls
back to the previous checkpoint. Pruning trusts a kept checkpoint by its marker and file sizes;
loading checks every checksum. A checkpoint that passes that check but cannot be loaded (bad
tensors, a different model) raises `CheckpointError`: it is never silently replaced by a fresh
start. Tensors are read with safetensors and JSON only, never with pickle.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from lmforge.durable import write_atomic
from lmforge.pipeline.storage import digests
from lmforge.pipeline.training.checkpoint.marker import (
    MARKER,
    MODEL_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    CheckpointError,
    marker_text,
    step_dir_name,
    verify_checkpoint,
)
from lmforge.pipeline.training.checkpoint.store import CheckpointStore

__all__ = [
    "MARKER",
    "MODEL_FILE",
    "OPTIMIZER_FILE",
    "STATE_FILE",
    "CheckpointError",
    "LoadedCheckpoint",
    "TrainerState",
    "latest_valid_checkpoint",
    "load_checkpoint",
    "prune_checkpoints",
    "step_dir_name",
    "verify_checkpoint",
    "write_checkpoint",
]


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
    val_losses: list[list[float]] = field(default_factory=list)
    """[step, val_loss] at every `train.eval_every` steps so far (what a sweep's ASHA judges)."""
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


def write_checkpoint(
    root: str | Path,
    params: dict[str, torch.Tensor],
    moments: dict[str, torch.Tensor],
    state: TrainerState,
) -> Path:
    """Write `root/step_<state.step>` atomically and return its path (replaces an older copy)."""
    store = CheckpointStore(root)
    pending = store.begin(state.step)
    tmp = Path(store.root) / pending
    try:
        save_file(_contiguous(params), str(tmp / MODEL_FILE))
        save_file(_contiguous(moments), str(tmp / OPTIMIZER_FILE))
        (tmp / STATE_FILE).write_text(state.to_json())
        _write_marker(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(store.commit(pending, state.step))


def latest_valid_checkpoint(root: str | Path) -> Path | None:
    """The newest checkpoint under the local directory `root` that passes `verify_checkpoint`
    (every checksum), or None.

    Every newer one that fails is skipped with a warning naming it and the reason.
    """
    store = CheckpointStore(root)
    for _, name, _ in store.steps():
        path = Path(store.root) / name
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
    """Delete all but the `keep` newest complete checkpoints under the local directory `root`,
    and leftovers of interrupted writes (`store.CheckpointStore.prune`); the removed ones."""
    return [Path(location) for location in CheckpointStore(root).prune(keep)]


def _write_marker(directory: Path) -> None:
    """The marker of the files in `directory`, hashed by reading them back (sha256)."""
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
