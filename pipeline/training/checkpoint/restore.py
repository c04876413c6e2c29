"""A worker's starting state: a fresh one, or its own part of the checkpoint `resume` chose,
loaded into its engine."""

from __future__ import annotations

from safetensors import SafetensorError

from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.async_save import CheckpointSaver, Published
from lmforge.pipeline.training.checkpoint.resume import (
    check_layout,
    check_resumable,
    choose_checkpoint,
)
from lmforge.pipeline.training.checkpoint.zero_shards import (
    full_shapes,
    needed_ranges,
    restore_local,
)
from lmforge.pipeline.training.payload import TrainingPayload
from lmforge.pipeline.training.train_config import TrainConfig


def restore_or_start(
    engine,
    payload: TrainingPayload,
    cfg: TrainConfig,
    rank: int,
    world: int,
    n_windows: int,
    saver: CheckpointSaver,
) -> tuple[ckpt.TrainerState, int | None]:
    """(the state to train from, the step it resumed from or None for a fresh run); the
    engine holds the checkpoint's weights and moments, and `saver` knows it as published."""
    ranges = needed_ranges(engine, rank)
    chosen = choose_checkpoint(payload.checkpoint_dir, rank, world, ranges)
    if chosen is None:
        fresh = ckpt.TrainerState(
            step=0,
            adam_step=0,
            sampler_position=0,
            tokens_seen=0,
            seed=cfg.seed,
            n_windows=n_windows,
            world_size=world,
            model_config=payload.model.to_dict(),
        )
        return fresh, None
    state = chosen.state
    try:
        check_resumable(chosen, payload.model, cfg, n_windows)
        check_layout(chosen, full_shapes(engine))
        read = chosen.layout.reader(chosen.directory)
        restore_local(engine, read, rank, state.adam_step)
    except ckpt.CheckpointError:
        raise
    except (OSError, ValueError, RuntimeError, SafetensorError) as exc:
        raise ckpt.CheckpointError(
            f"checkpoint {chosen.path} is marked complete but cannot be loaded: {exc}. "
            "Delete that directory to resume from the previous checkpoint."
        ) from exc
    finally:
        saver.store.release(rank)
    state.world_size = world
    saver.published = Published(state.step, chosen.path)
    return state, state.step
