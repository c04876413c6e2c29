"""Sharded checkpoints through Ray Train: every worker writes its own shard, a run resumes on
another number of workers and another ZeRO stage with the losses of the uninterrupted run, a
worker killed while writing its shard leaves no checkpoint visible but the previous ones, and a
shard that no longer matches the marker is skipped for the checkpoint before it."""

from __future__ import annotations

import json

import pytest
from fault.training_runs import BASE, MODEL, assert_same_losses, train_config

from lmforge.pipeline.training.checkpoint.consolidated import MARKER, latest_valid_checkpoint
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, shard_names
from lmforge.pipeline.training.driver import PretrainingError
from lmforge.pipeline.training.fault import FaultInjection

pytestmark = pytest.mark.integration


def _layout(step_dir) -> dict:
    return json.loads((step_dir / LAYOUT_FILE).read_text())


def test_2_then_1_then_2_workers_and_zero2_then_zero3_continue_the_same_run(
    runs, reference, tmp_path
):
    checkpoints = tmp_path / "checkpoints"
    first = runs.train("two", train_config(max_steps=4), checkpoint_dir=checkpoints)
    layout = _layout(checkpoints / "step_000004")
    assert (layout["world_size"], layout["zero_stage"]) == (2, 2)
    listed = json.loads((checkpoints / "step_000004" / MARKER).read_text())["files"]
    assert {*shard_names(0, 2), *shard_names(1, 2)} <= set(listed)
    assert first["resumed_from_step"] is None

    one = runs.train("one", train_config(max_steps=8, num_workers=1), checkpoint_dir=checkpoints)
    assert one["resumed_from_step"] == 4 and one["world_size"] == 1
    assert _layout(checkpoints / "step_000008")["world_size"] == 1

    two = runs.train("zero3", train_config(max_steps=12, zero_stage=3), checkpoint_dir=checkpoints)
    assert two["resumed_from_step"] == 8 and two["world_size"] == 2
    assert _layout(checkpoints / "step_000012")["zero_stage"] == 3
    assert two["steps"] == BASE.max_steps
    assert two["tokens"] == BASE.max_steps * BASE.global_batch_size * MODEL.block_size
    assert_same_losses(two["losses"], reference["losses"])


def test_a_kill_mid_save_hides_the_partial_checkpoint_and_a_corrupt_shard_is_skipped(
    runs, reference, tmp_path
):
    checkpoints = tmp_path / "checkpoints"
    dies_writing = FaultInjection(
        kill_rank=1, kill_at_step=12, once_file=str(tmp_path / "killed"), during_save=True
    )
    with pytest.raises(PretrainingError, match="rerunning continues from the newest"):
        runs.train(
            "killed", train_config(max_failures=0), checkpoint_dir=checkpoints, fault=dies_writing
        )
    assert (tmp_path / "killed").is_file(), "rank 1 died writing its shard of step 12"
    visible = sorted(p.name for p in checkpoints.iterdir() if not p.name.startswith("."))
    assert visible == ["step_000004", "step_000008"], "the save that died is not visible"
    assert list(checkpoints.glob(".step_000012.tmp-*/" + shard_names(1, 2)[0])), "it was midway"
    assert latest_valid_checkpoint(checkpoints).name == "step_000008"

    shard = checkpoints / "step_000008" / shard_names(0, 2)[0]
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # same size: only the marker's sha256 tells
    shard.write_bytes(bytes(data))
    resumed = runs.train("resumed", train_config(), checkpoint_dir=checkpoints)
    assert resumed["resumed_from_step"] == 4, "step 8's corrupt shard was found: back to step 4"
    assert_same_losses(resumed["losses"], reference["losses"])
    assert not list(checkpoints.glob(".step_*")), "the dead save's leftovers are pruned"
