"""Where a pretrain run's checkpoints live: runs share a lineage only when one can continue the
other's trajectory exactly."""

from __future__ import annotations

import dataclasses

from lmforge.model.config import ModelConfig
from lmforge.pipeline.stages.pretrain.stage import lineage_of
from lmforge.pipeline.training.train_config import TrainConfig

MODEL = ModelConfig(vocab_size=256, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
INPUTS = {"tokenize": "a" * 16, "sample_index": "b" * 16, "train_tokenizer": "c" * 16}


def _lineage(**train) -> str:
    base = {"lr": 3e-3, "min_lr": 3e-5, "warmup_steps": 5, "max_steps": 100, "num_workers": 2}
    return lineage_of(MODEL, TrainConfig(**(base | train)), INPUTS)


def test_a_decaying_cosine_run_with_more_steps_is_another_lineage():
    # Its rate at every step after warmup differs, so continuing the shorter run would not
    # reproduce it.
    assert _lineage(max_steps=150) != _lineage(max_steps=100)


def test_more_steps_continue_the_lineage_where_the_rate_ignores_them():
    assert _lineage(max_steps=150, min_lr=3e-3) == _lineage(max_steps=100, min_lr=3e-3)
    inverse_sqrt = {"schedule": "inverse_sqrt"}
    assert _lineage(max_steps=150, **inverse_sqrt) == _lineage(max_steps=100, **inverse_sqrt)


def test_worker_count_and_zero_stage_never_change_it_and_the_trajectory_always_does():
    assert _lineage(num_workers=1, zero_stage=3) == _lineage()
    assert _lineage(lr=1e-3) != _lineage()
    assert _lineage(seed=1) != _lineage()
    other_data = dict(INPUTS, tokenize="d" * 16)
    config = TrainConfig(lr=3e-3, min_lr=3e-5, warmup_steps=5, max_steps=100, num_workers=2)
    assert lineage_of(MODEL, config, other_data) != lineage_of(MODEL, config, INPUTS)
    assert lineage_of(dataclasses.replace(MODEL, n_layer=3), config, INPUTS) != _lineage()
