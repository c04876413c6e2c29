"""A checkpoint continues a run only if it belongs to it: same model, not past max_steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.checkpoint.consolidated import (
    CheckpointError,
    LoadedCheckpoint,
    TrainerState,
)
from lmforge.pipeline.training.checkpoint.resume import check_resumable
from lmforge.pipeline.training.train_config import TrainConfig

MODEL = ModelConfig(vocab_size=50, block_size=8, d_model=32, n_head=2, n_layer=2, d_ff=64)


def _loaded(step: int = 10, model: ModelConfig = MODEL, n_windows: int = 100) -> LoadedCheckpoint:
    state = TrainerState(
        step=step,
        adam_step=step,
        sampler_position=8 * step,
        tokens_seen=64 * step,
        seed=1,
        n_windows=n_windows,
        world_size=2,
        model_config=model.to_dict(),
    )
    return LoadedCheckpoint(
        path=Path("ckpt/step_000010"), params={"w": torch.zeros(1)}, moments={}, state=state
    )


def test_a_checkpoint_of_the_same_run_is_resumable():
    check_resumable(_loaded(), MODEL, TrainConfig(max_steps=20, num_workers=1), 100)
    check_resumable(_loaded(step=20), MODEL, TrainConfig(max_steps=20, num_workers=1), 100)


def test_a_checkpoint_of_another_model_is_an_error_naming_it():
    other = ModelConfig(vocab_size=50, block_size=8, d_model=64, n_head=2, n_layer=2, d_ff=64)
    with pytest.raises(CheckpointError, match=r"step_000010.*'d_model': 64"):
        check_resumable(_loaded(model=other), MODEL, TrainConfig(num_workers=1), 100)


def test_a_checkpoint_past_max_steps_is_an_error_that_says_what_to_do():
    with pytest.raises(CheckpointError, match="raise train.max_steps"):
        check_resumable(_loaded(step=30), MODEL, TrainConfig(max_steps=20, num_workers=1), 100)


def test_resuming_on_changed_data_warns_that_the_order_differs():
    with pytest.warns(UserWarning, match="100 training windows, the data now has 120"):
        check_resumable(_loaded(), MODEL, TrainConfig(max_steps=20, num_workers=1), 120)
