"""A failed training run is reported by its innermost error line, not Ray Train's wrapper."""

from __future__ import annotations

from lmforge.pipeline.training.launch import root_cause

WORKER_FAILURE = """Training failed due to worker errors:
[Rank 0 Error Snippet]:
Traceback (most recent call last):
  File "/repo/pipeline/training/worker.py", line 63, in train_loop_per_worker
    WorkerRun(config["job"]).run()
ray.train.WorkerGroupError: Training failed due to worker errors:
(RayTrainWorker pid=30762) FileNotFoundError: [Errno 2] Failed to open local file 'step_000020'
"""


def test_the_workers_innermost_error_names_the_failure():
    cause = root_cause(RuntimeError(WORKER_FAILURE))
    assert cause == "FileNotFoundError: [Errno 2] Failed to open local file 'step_000020'"


def test_an_error_without_a_traceback_keeps_its_type_and_first_line():
    assert root_cause(TimeoutError("\n\nno workers within 60 s\nmore")) == (
        "TimeoutError: no workers within 60 s"
    )
