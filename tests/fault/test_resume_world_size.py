"""Resuming on another number of workers continues at the same step, reads the same global order
of windows and restores the optimizer state: its losses equal the uninterrupted 2-worker run's.

Also the two ways a run continues from its checkpoint directory: a run that was interrupted, and
a finished run whose max_steps was raised (the demo's ZeRO-1 layout here; a finished 2-worker
run continued on 1 worker is `test_sharded_checkpoints.py`'s first test).
"""

from __future__ import annotations

import os

import pytest
from fault.training_runs import assert_same_losses, train_config

from lmforge.pipeline.training.checkpoint.consolidated import latest_valid_checkpoint
from lmforge.pipeline.training.driver import PretrainingError
from lmforge.pipeline.training.fault import FaultInjection

pytestmark = pytest.mark.integration


def test_an_interrupted_1_worker_zero3_run_continues_on_2_workers(runs, reference, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    with pytest.raises(PretrainingError, match="rerunning continues from the newest"):
        runs.train(
            "one",
            train_config(num_workers=1, zero_stage=3, max_failures=0),
            checkpoint_dir=checkpoints,
            fault=FaultInjection(kill_rank=0, kill_at_step=6, once_file=str(tmp_path / "k")),
        )
    assert latest_valid_checkpoint(checkpoints).name == "step_000004"

    resumed = runs.train(
        "two", train_config(num_workers=2, zero_stage=3), checkpoint_dir=checkpoints
    )
    assert resumed["resumed_from_step"] == 4 and resumed["world_size"] == 2
    assert_same_losses(resumed["losses"], reference["losses"])
    assert resumed["final_loss"] < resumed["initial_loss"]


def test_a_2_worker_zero1_run_the_demo_layout_continues_from_its_checkpoint(
    runs, reference, tmp_path
):
    # The tiny preset trains under ZeRO 1 (conf/deepspeed/zero1.json, gradients not copied into
    # a contiguous buffer): its partitions of fp32 weights and Adam moments must restore too.
    # Neither run starts Ray Data's DatasetManager actor, nor (on this local runtime, as the
    # pipeline's) its autoscaling coordinator (`PipelineTrainer`).
    managers_before = _actors_of_class("DatasetManager")
    checkpoints = tmp_path / "checkpoints"
    first = runs.train("zero1", train_config(max_steps=6, zero_stage=1), checkpoint_dir=checkpoints)
    assert first["steps"] == 6 and first["resumed_from_step"] is None

    resumed = runs.train(
        "zero1-more", train_config(max_steps=12, zero_stage=1), checkpoint_dir=checkpoints
    )
    assert resumed["resumed_from_step"] == 6 and resumed["world_size"] == 2
    assert_same_losses(resumed["losses"], reference["losses"])
    # The two workers hold this 2-CPU Ray node (`ray_session`), as the demo's hold the
    # machine's: each rank's training thread keeps to its own CPU (`cpu_pinning`).
    assert len(os.sched_getaffinity(0)) >= 2
    cpus = resumed["training_thread_cpus"]
    assert [len(share) for share in cpus] == [1, 1] and cpus[0] != cpus[1]
    # Both workers started with glibc's tunables and keep the memory their steps free.
    assert resumed["freed_memory_kept"] == [True, True]
    assert len(_actors_of_class("TrainController")) >= 2  # the runs went through Ray Train
    assert _actors_of_class("DatasetManager") == managers_before
    assert not _actors_of_class("_AutoscalingCoordinatorActor")


def _actors_of_class(name: str) -> set[str]:
    """Ids of the actors of class `name` this Ray session has had, dead ones included (the
    GCS's actor table: the state API needs the dashboard, which these tests leave out)."""
    from ray._private import state

    return {key for key, actor in state.actors().items() if actor["ActorClassName"] == name}
