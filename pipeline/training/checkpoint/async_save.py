"""Checkpoints saved while training goes on: every rank writes its own shard, rank 0 publishes.

`save(state)` is called by every rank at the same step. It waits for the previous save (at most
one is in flight), rank 0 opens the new checkpoint's directory (`begin`) and tells the others,
and every rank copies its own part of the parameters and AdamW moments into host memory it keeps
between saves (`staging`): training pauses for that copy only. A background thread per rank then
writes the rank's two shards (hashed with xxh3 as they are written, straight from the staged
pages to the disk where the file system allows O_DIRECT; hashing and writing release the GIL,
so the training thread keeps running); the ranks' threads exchange what they wrote over a gloo
process group of their own (the training's collectives never wait for them), and rank 0's thread
publishes the checkpoint: layout, trainer state, and the `COMPLETE` marker last, then prunes.
Every thread learns the outcome, so `wait()` on any rank returns once the checkpoint is
published, with its location, or raises the error of whichever rank failed.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable

import torch.distributed as dist

from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.shard_format import (
    LAYOUT_FILE,
    RankShard,
    layout_json,
    write_rank_shard,
)
from lmforge.pipeline.training.checkpoint.staging import Staged, StagingArea, stage_fragments
from lmforge.pipeline.training.checkpoint.store import open_store
from lmforge.pipeline.training.checkpoint.zero_shards import full_shapes, local_fragments
from lmforge.pipeline.training.checkpoint.zero_state import adam_step
from lmforge.pipeline.training.collectives import all_gather, broadcast_from_rank0
from lmforge.pipeline.training.fault import FaultInjection


@dataclasses.dataclass(slots=True)
class Published:
    """A checkpoint this run published."""

    step: int
    location: str
    """Its directory path or URI."""


class CheckpointSaver:
    """One rank's side of the run's checkpoints (build it on every rank, in the same order)."""

    def __init__(
        self,
        engine,
        location: str,
        rank: int,
        world: int,
        keep: int,
        fault: FaultInjection | None = None,
    ) -> None:
        self.engine, self.rank, self.world, self.keep = engine, rank, world, keep
        self.store = open_store(location)
        self.fault = fault
        self.group = dist.new_group(backend="gloo") if world > 1 else None
        self.published: Published | None = None
        """The newest checkpoint published (or resumed from) by this run."""
        self._thread: threading.Thread | None = None
        self._staging = StagingArea()
        """Where this rank's part is copied for the writer thread, kept between saves."""
        self._staged: Staged | None = None
        """The copy of this rank's part that the writer thread writes."""
        self._outcome: Published | str | None = None

    def save(self, state: ckpt.TrainerState) -> None:
        """Start saving `state` with the engine's current weights and moments."""
        self.wait()
        pending = self.store.begin(state.step) if self.rank == 0 else None
        pending = broadcast_from_rank0(pending, self.world, group=None)
        fragments = local_fragments(self.engine, self.rank, self.world)
        self._staged = stage_fragments(fragments, self._staging)
        texts = {}
        if self.rank == 0:
            state = dataclasses.replace(state, adam_step=adam_step(self.engine))
            texts[ckpt.STATE_FILE] = state.to_json()
        shapes = full_shapes(self.engine)
        self._thread = threading.Thread(
            target=self._write,
            args=(pending, state.step, texts, shapes, self._midway(state.step)),
            name=f"checkpoint-writer-{state.step}",
            daemon=True,
        )
        self._thread.start()

    @property
    def in_flight(self) -> bool:
        """True while this rank's writer is still at work on a save."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self) -> Published | None:
        """Block until the save in flight is published; the newest published checkpoint."""
        if self._thread is not None:
            self._thread.join()
            self._thread, outcome = None, self._outcome
            if not isinstance(outcome, Published):
                raise ckpt.CheckpointError(f"saving a checkpoint failed: {outcome}")
            self.published = outcome
        return self.published

    def _write(self, pending, step, texts, shapes, midway) -> None:
        try:
            mine: RankShard | str = self._write_shard(pending, midway)
            shards = all_gather(mine, self.world, self.group)
            outcome = (
                self._publish(pending, step, shards, texts, shapes) if self.rank == 0 else None
            )
            self._outcome = broadcast_from_rank0(outcome, self.world, group=self.group)
        except Exception as exc:  # a peer died mid-exchange: the save fails on this rank too
            self._outcome = f"rank {self.rank}: {exc}"

    def _write_shard(self, pending: str, midway) -> RankShard | str:
        staged, self._staged = self._staged, None  # its regions stay for the next save
        try:
            write_file = functools.partial(self.store.write_file, pending)
            return write_rank_shard(write_file, self.rank, self.world, staged, midway)
        except Exception as exc:
            return f"rank {self.rank} could not write its shard: {exc}"

    def _publish(self, pending, step, shards, texts, shapes) -> Published | str:
        errors = [s for s in shards if isinstance(s, str)]
        if errors:
            return errors[0]
        files = {name: meta for shard in shards for name, meta in shard.files.items()}
        stage = self.engine.zero_optimization_stage()
        texts = texts | {LAYOUT_FILE: layout_json(shapes, shards, stage)}
        try:
            return Published(step, self.store.publish(pending, step, texts, files, self.keep))
        except Exception as exc:
            return f"publishing the checkpoint of step {step} failed: {exc}"

    def _midway(self, step: int) -> Callable[[], None] | None:
        fault = self.fault
        if fault is None or not fault.during_save or not fault.armed(self.rank, step):
            return None
        return functools.partial(fault.maybe_fire, self.rank, step)
