"""A sweep's stop request to a pretraining run, and the settings that serve early stopping."""

from __future__ import annotations

import pytest

from lmforge.pipeline.training.early_stop.requests import (
    StoppedEarly,
    read_stop,
    request_stop,
    stop_request_file,
    verdict,
    withdraw_stop,
)
from lmforge.pipeline.training.train_config import TrainConfig


def test_a_stop_request_lives_beside_the_key_in_a_path_store_and_round_trips(tmp_path):
    path = stop_request_file(str(tmp_path / "store"), "abc123")
    assert path == str(tmp_path / "store" / "pretrain" / ".abc123.stop.json")
    assert stop_request_file("s3://bucket/store", "abc123") is None
    assert read_stop(path) is None
    request_stop(path, {"variant": "v1", "step": 8})
    request_stop(path, {**read_stop(path), "stopped_at": 12})
    assert read_stop(path) == {"variant": "v1", "step": 8, "stopped_at": 12}
    withdraw_stop(path)
    assert read_stop(path) is None


def test_stopped_early_keeps_its_step_and_message_across_processes():
    rebuild, args = StoppedEarly(12).__reduce__()  # as Ray rebuilds it in the driver
    error = rebuild(*args)
    assert error.step == 12
    assert str(error).startswith("stopped early at step 12 by the sweep")
    assert str(error).count("stopped early") == 1


def test_training_ends_at_stopped_at_when_set_and_it_cannot_pass_max_steps():
    assert TrainConfig(max_steps=40).last_step == 40
    assert TrainConfig(max_steps=40, stopped_at=12).last_step == 12
    with pytest.raises(ValueError, match="stopped_at"):
        TrainConfig(max_steps=40, stopped_at=41)
    with pytest.raises(ValueError, match="eval_every"):
        TrainConfig(eval_every=-1)


def test_a_watched_run_waits_for_the_verdict_on_its_step(tmp_path):
    path = stop_request_file(str(tmp_path), "k")
    assert verdict(path, 4, wait_s=0) == "unwatched"
    request_stop(path, {"variant": "v1"})  # the sweep watches, no verdict yet
    assert verdict(path, 4, wait_s=0.2) == "late"
    request_stop(path, {"variant": "v1", "answered": 8})
    assert verdict(path, 4) == "go" and verdict(path, 8) == "go"
    request_stop(path, {"variant": "v1", "answered": 8, "stop": True, "step": 8})
    assert verdict(path, 12) == "stop"
