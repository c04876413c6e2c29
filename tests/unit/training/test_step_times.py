"""Step time is split into data, compute, comm, optimizer, log and checkpoint: each block is
charged to its part, the gradient reduction DeepSpeed runs inside the backward moves from compute
to comm, and every reading starts a new interval while the totals keep growing."""

import time

import pytest

from lmforge.pipeline.training.reporting.step_times import (
    StepTimes,
    breakdown,
    data_wait_note,
    time_gradient_reduction,
)


def test_blocks_are_charged_to_their_part_and_a_reading_starts_a_new_interval():
    times = StepTimes()
    with times.part("data"):
        time.sleep(0.02)
    with times.part("compute"):
        time.sleep(0.04)
    first = times.take()
    assert set(first) == {
        "time_compute_s",
        "time_comm_s",
        "time_optimizer_s",
        "time_data_s",
        "time_log_s",
        "time_checkpoint_s",
    }
    assert first["time_data_s"] >= 0.02 and first["time_compute_s"] >= 0.04
    assert first["time_compute_s"] > first["time_data_s"]
    assert times.take()["time_compute_s"] == 0.0
    assert times.totals["compute"] == pytest.approx(first["time_compute_s"])


class FakeEngine:
    """Stands in for the DeepSpeed engine: its backward calls allreduce_gradients."""

    def allreduce_gradients(self, bucket_size: int = 0) -> int:
        time.sleep(0.03)
        return bucket_size

    def backward(self) -> None:
        time.sleep(0.01)
        self.allreduce_gradients(bucket_size=5)


def test_the_reduction_inside_the_backward_is_charged_to_comm_not_compute():
    times, engine = StepTimes(), FakeEngine()
    time_gradient_reduction(engine, times)
    with times.part("compute"):
        engine.backward()
    seconds = times.take()
    assert seconds["time_comm_s"] >= 0.03
    assert 0.01 <= seconds["time_compute_s"] < 0.03
    assert engine.allreduce_gradients(bucket_size=7) == 7  # outside a block: comm alone
    seconds = times.take()
    assert seconds["time_comm_s"] >= 0.03 and seconds["time_compute_s"] == 0.0


def test_breakdown_gives_each_part_its_share_of_the_sum():
    line = breakdown({"time_compute_s": 3.0, "time_comm_s": 1.0, "time_data_s": 0.0})
    assert line == "compute 75% comm 25% data 0%"
    assert breakdown({"time_compute_s": 0.0}) == ""


def test_the_progress_line_notes_a_data_wait_only_above_five_percent_of_the_step():
    assert data_wait_note({"time_compute_s": 0.9, "time_data_s": 0.1}) == (
        " | waiting for data 10% of the step"
    )
    assert data_wait_note({"time_compute_s": 0.96, "time_data_s": 0.04}) == ""
    assert data_wait_note({"time_compute_s": 0.0, "time_data_s": 0.0}) == ""
