"""The consolidated optimizer state: the same AdamW at every ZeRO stage, restored exactly.

Runs DeepSpeed in this process as a world of one (gloo); resuming on other world sizes through
Ray Train is tests/fault/test_resume_matrix.py.
"""

from __future__ import annotations

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.checkpoint.zero_state import (
    adam_step,
    gather_full_state,
    restore_full_state,
)
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine

# DeepSpeed engines at every ZeRO stage; ZeRO-3 also patches torch
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("world_of_one")]

MODEL = ModelConfig(vocab_size=50, block_size=8, d_model=32, n_head=2, n_layer=2, d_ff=64)


def _engine(stage: int, seed: int, **offload):
    cfg = TrainConfig(
        zero_stage=stage,
        num_workers=1,
        global_batch_size=4,
        micro_batch_size=2,
        lr=1e-2,
        grad_clip=0.5,
        **offload,
    )
    torch.manual_seed(seed)
    engine = build_engine(MODEL, cfg, 1, torch.device("cpu"))
    return engine, TrainStep(engine, cfg, torch.device("cpu"), 1)


def _batches(step: int):
    g = torch.Generator().manual_seed(100 + step)
    tokens = torch.randint(0, 50, (4, 9), generator=g)
    return [(tokens[i : i + 2, :-1], tokens[i : i + 2, 1:]) for i in (0, 2)]


def _train(step_fn, steps):
    return [step_fn(_batches(s), lr=1e-2).loss for s in steps]


def test_every_zero_stage_trains_the_same_trajectory():
    reference = None
    for stage in (0, 1, 2, 3):
        engine, step_fn = _engine(stage, seed=0)
        losses = _train(step_fn, range(4))
        if reference is None:
            reference = losses
        assert losses == pytest.approx(reference, rel=1e-5), f"ZeRO-{stage}"
        assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    ("stage", "offload"),
    [(2, {"offload_optimizer": True}), (3, {"offload_optimizer": True, "offload_params": True})],
)
def test_cpu_offload_keeps_the_same_optimizer_and_state(stage, offload):
    _, plain_step = _engine(0, seed=0)
    reference = _train(plain_step, range(4))
    engine, step_fn = _engine(stage, seed=0, **offload)
    assert _train(step_fn, range(3)) == pytest.approx(reference[:3], rel=1e-5)
    params, moments = gather_full_state(engine)
    fresh, fresh_step = _engine(stage, seed=1, **offload)
    restore_full_state(fresh, params, moments, adam_step(engine))
    assert _train(fresh_step, [3]) == pytest.approx(reference[3:], rel=1e-5)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_a_restored_state_continues_exactly_like_the_uninterrupted_run(stage):
    engine, step_fn = _engine(stage, seed=0)
    _train(step_fn, range(3))
    params, moments = gather_full_state(engine)
    step = adam_step(engine)
    uninterrupted = _train(step_fn, range(3, 6))
    assert step == 3

    fresh, fresh_step = _engine(stage, seed=1)  # another init: everything must come from the state
    restore_full_state(fresh, params, moments, step)
    assert _train(fresh_step, range(3, 6)) == pytest.approx(uninterrupted, rel=1e-6)


def test_the_optimizer_moments_matter_so_the_resume_comparison_can_fail():
    engine, step_fn = _engine(2, seed=0)
    _train(step_fn, range(3))
    params, moments = gather_full_state(engine)
    uninterrupted = _train(step_fn, range(3, 6))

    weights_only, weights_only_step = _engine(2, seed=1)
    restore_full_state(weights_only, params, None, 0)  # fresh AdamW moments
    diverged = _train(weights_only_step, range(3, 6))
    assert diverged[0] == pytest.approx(uninterrupted[0], rel=1e-6)  # same weights, same loss
    assert abs(diverged[-1] - uninterrupted[-1]) > 1e-3 * uninterrupted[-1]


def test_the_state_holds_full_fp32_tensors_named_like_the_model():
    engine, step_fn = _engine(3, seed=0)
    _train(step_fn, range(1))
    params, moments = gather_full_state(engine)
    assert params["wte.weight"].shape == (50, 32)
    assert params["wte.weight"].dtype == torch.float32
    assert set(moments) == {f"{k}/{n}" for n in params for k in ("exp_avg", "exp_avg_sq")}
    assert float(moments["exp_avg_sq/wte.weight"].abs().sum()) > 0


def test_restoring_tensors_of_another_model_names_the_mismatch():
    engine, _ = _engine(2, seed=0)
    params, moments = gather_full_state(engine)
    params["wte.weight"] = torch.zeros(51, 32)
    with pytest.raises(ValueError, match=r"wte.weight.*\(51, 32\)"):
        restore_full_state(engine, params, moments, 0)
    del params["wte.weight"]
    with pytest.raises(KeyError, match="wte.weight"):
        restore_full_state(engine, params, moments, 0)


def test_the_engine_builds_no_shared_memory_allreduce_op_on_cpu():
    """DeepSpeed would JIT-compile its CPU shm op under a file lock a killed build leaves behind."""
    import deepspeed.comm.comm as ds_comm

    _engine(2, seed=0)
    assert ds_comm.cdb is not None
    assert ds_comm.cdb.shm_comm_op is None
