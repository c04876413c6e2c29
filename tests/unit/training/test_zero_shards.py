"""A rank's own shard, saved in the background and restored into an engine of another ZeRO stage,
continues exactly like the uninterrupted run; ZeRO-3 builds the model already partitioned.

Runs DeepSpeed in this process as a world of one (gloo); other world sizes go through Ray Train
in tests/fault/test_resume_matrix.py.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.async_save import CheckpointSaver
from lmforge.pipeline.training.checkpoint.resume import choose_checkpoint
from lmforge.pipeline.training.checkpoint.zero_shards import needed_ranges, restore_local
from lmforge.pipeline.training.checkpoint.zero_state import adam_step, gather_full_state
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("world_of_one")]

MODEL = ModelConfig(vocab_size=50, block_size=8, d_model=32, n_head=2, n_layer=2, d_ff=64)


def _engine(stage: int, seed: int):
    cfg = TrainConfig(
        zero_stage=stage, num_workers=1, global_batch_size=4, micro_batch_size=2, lr=1e-2
    )
    torch.manual_seed(seed)
    engine = build_engine(MODEL, cfg, 1, torch.device("cpu"))
    return engine, TrainStep(engine, cfg, torch.device("cpu"), 1)


def _train(step_fn, steps):
    losses = []
    for step in steps:
        tokens = torch.randint(0, 50, (4, 9), generator=torch.Generator().manual_seed(100 + step))
        batches = [(tokens[i : i + 2, :-1], tokens[i : i + 2, 1:]) for i in (0, 2)]
        losses.append(step_fn(batches, lr=1e-2).loss)
    return losses


def _state(step: int) -> ckpt.TrainerState:
    return ckpt.TrainerState(
        step=step, adam_step=0, sampler_position=0, tokens_seen=0, seed=0, n_windows=1, world_size=1
    )


@pytest.mark.parametrize(("saved_at", "resumed_at"), [(0, 3), (3, 1), (2, 0)])
def test_a_saved_shard_resumes_exactly_under_another_zero_stage(tmp_path, saved_at, resumed_at):
    engine, step_fn = _engine(saved_at, seed=0)
    _train(step_fn, range(3))
    saver = CheckpointSaver(engine, str(tmp_path), rank=0, world=1, keep=2)
    saver.save(_state(3))
    uninterrupted = _train(step_fn, range(3, 6))  # trains on while the shard is written
    published = saver.wait()
    assert published.step == 3 and published.location == str(tmp_path / "step_000003")

    fresh, fresh_step = _engine(resumed_at, seed=1)  # another init: all must come from the file
    ranges = needed_ranges(fresh, 0)
    chosen = choose_checkpoint(str(tmp_path), 0, 1, ranges)
    assert chosen.state.adam_step == 3 and chosen.layout.shapes["wte.weight"] == (50, 32)
    read = chosen.layout.reader(chosen.directory)
    restore_local(fresh, read, 0, chosen.state.adam_step)
    # other stages sum in another order: 1e-5, as in test_zero_state
    assert _train(fresh_step, range(3, 6)) == pytest.approx(uninterrupted, rel=1e-5)


def test_a_checkpoint_of_the_consolidated_format_resumes_through_the_same_reader(tmp_path):
    engine, step_fn = _engine(2, seed=0)
    _train(step_fn, range(3))
    params, moments = gather_full_state(engine)
    state = dataclasses.replace(_state(3), adam_step=adam_step(engine))
    ckpt.write_checkpoint(tmp_path, params, moments, state)
    uninterrupted = _train(step_fn, range(3, 6))

    fresh, fresh_step = _engine(3, seed=1)
    chosen = choose_checkpoint(str(tmp_path), 0, 1, needed_ranges(fresh, 0))
    assert {p.name for p in chosen.directory.iterdir()} >= {ckpt.MODEL_FILE, ckpt.OPTIMIZER_FILE}
    restore_local(fresh, chosen.layout.reader(chosen.directory), 0, chosen.state.adam_step)
    assert _train(fresh_step, range(3, 6)) == pytest.approx(uninterrupted, rel=1e-5)


def test_zero3_builds_the_model_partitioned_with_the_weights_of_one_process():
    engine, _ = _engine(3, seed=0)
    weight = engine.module.wte.weight
    assert weight.numel() == 0 and weight.ds_shape == (50, 32)  # only the partition is held
    torch.manual_seed(0)
    plain = GPT(MODEL)
    params = dict(engine.module.named_parameters())
    import deepspeed

    for name, expected in plain.named_parameters():
        with deepspeed.zero.GatheredParameters([params[name]]):
            assert torch.equal(params[name].data, expected.data), name
