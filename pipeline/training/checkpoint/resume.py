"""Which checkpoint a run continues from, checked by every rank, and whether it may.

A run (a new one of the same key, or one Ray Train restarted after a worker failure) continues
from the newest checkpoint in its checkpoint directory that is complete and intact:
- rank 0 picks the newest one whose marker and file sizes check out and tells the others;
- every rank fetches the files it will read (the trainer state, the layout, and the shards that
  hold its own ranges; from a bucket only those, into its own staging directory) and checks
  each against the sha256 in the marker, so the ranks together check the whole checkpoint;
- if any rank found a file that does not match, rank 0 warns, naming the checkpoint and the file,
  and they try the next older one.
A checkpoint of another model, or past max_steps, is an error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from safetensors import SafetensorError

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, Layout
from lmforge.pipeline.training.checkpoint.store import open_store
from lmforge.pipeline.training.collectives import all_gather, broadcast_from_rank0
from lmforge.pipeline.training.train_config import TrainConfig


@dataclass(slots=True)
class ChosenCheckpoint:
    """The checkpoint a rank resumes from, its files this rank reads fetched and verified."""

    path: str
    """Where it lives (a directory path or a URI)."""
    directory: Path
    """A local directory holding the files this rank reads."""
    state: ckpt.TrainerState
    layout: Layout


def choose_checkpoint(
    checkpoint_dir: str, rank: int, world: int, ranges: dict[str, tuple[int, int]]
) -> ChosenCheckpoint | None:
    """The newest intact checkpoint under `checkpoint_dir`, or None for a fresh start.

    ranges: the flat range of each parameter this rank holds (see `zero_shards.needed_ranges`).
    Every rank calls it. Release the fetched files with `open_store(...).release(rank)`.
    """
    store = open_store(checkpoint_dir)
    skipped: set[str] = set()
    while True:
        choice = store.newest_complete(skipped) if rank == 0 else None
        choice = broadcast_from_rank0(choice, world)
        if choice is None:
            return None
        chosen, problem = _fetch(store, choice, rank, ranges)
        problems = [p for p in all_gather(problem, world) if p is not None]
        if not problems:
            return chosen
        if rank == 0:
            warnings.warn(f"skipping checkpoint {choice}: {problems[0]}", stacklevel=2)
        skipped.add(choice)


def _fetch(store, location: str, rank: int, ranges) -> tuple[ChosenCheckpoint | None, str | None]:
    """Fetch and verify this rank's files of the checkpoint at `location`."""
    listed = store.listed(location)
    first = [ckpt.STATE_FILE, LAYOUT_FILE if LAYOUT_FILE in listed else ckpt.MODEL_FILE]
    directory, problem = store.fetch(location, first, rank)
    if problem is not None:
        return None, problem
    try:
        state = ckpt.TrainerState.from_json((directory / ckpt.STATE_FILE).read_text())
        layout = Layout.of(directory)
        shards = sorted(layout.files_for(ranges, optimizer=True) - set(first))
    except (OSError, ValueError, TypeError, KeyError, SafetensorError) as exc:
        raise ckpt.CheckpointError(
            f"checkpoint {location} is marked complete but cannot be loaded: {exc}. "
            "Delete that directory to resume from the previous checkpoint."
        ) from exc
    directory, problem = store.fetch(location, shards, rank)
    return ChosenCheckpoint(path=location, directory=directory, state=state, layout=layout), problem


def check_layout(chosen: ChosenCheckpoint, shapes: dict[str, tuple[int, ...]]) -> None:
    """Raise CheckpointError unless the checkpoint holds exactly these parameters and shapes."""
    saved = chosen.layout.shapes
    missing, extra = sorted(set(shapes) - set(saved)), sorted(set(saved) - set(shapes))
    wrong = {
        n: (saved[n], shape) for n, shape in shapes.items() if n in saved and saved[n] != shape
    }
    if missing or extra or wrong:
        raise ckpt.CheckpointError(
            f"checkpoint {chosen.path} is marked complete but cannot be loaded into the model: "
            f"missing {missing}, unexpected {extra}, shape (checkpoint, model) {wrong}"
        )


def check_resumable(
    loaded: ckpt.LoadedCheckpoint | ChosenCheckpoint,
    model: ModelConfig,
    cfg: TrainConfig,
    n_windows: int,
) -> None:
    """Raise CheckpointError if `loaded` cannot continue this run; warn if the data changed."""
    state = loaded.state
    if state.model_config and state.model_config != model.to_dict():
        raise ckpt.CheckpointError(
            f"checkpoint {loaded.path} was written for model {state.model_config}, but this run "
            f"trains {model.to_dict()}; use another checkpoint directory"
        )
    if state.step > cfg.max_steps:
        raise ckpt.CheckpointError(
            f"checkpoint {loaded.path} is at step {state.step}, past train.max_steps="
            f"{cfg.max_steps}; raise train.max_steps or use another checkpoint directory"
        )
    if state.n_windows != n_windows:
        warnings.warn(
            f"checkpoint {loaded.path} saw {state.n_windows} training windows, the data now has "
            f"{n_windows}: the data order after step {state.step} differs from the original run",
            stacklevel=2,
        )
