"""A run's start sets MLflow up while Ray starts (`_Runner.run`); when either fails, the error
the user sees and the state MLflow is left in are the ones of a start done one after the other:
MLflow's error first, and the pipeline's runs KILLED once MLflow has them."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from lmforge.pipeline.engine.runner import _Runner
from lmforge.pipeline.errors import LmforgeError


class _Recorder(_Runner):
    """Only `_after_failed_start`'s own logic: `_mark_killed` is recorded, not run."""

    def __init__(self) -> None:
        self.killed = 0

    def _mark_killed(self) -> None:
        self.killed += 1


def _done(error: BaseException | None = None) -> Future:
    future: Future = Future()
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
    return future


def test_mlflows_error_is_raised_rather_than_rays():
    runner = _Recorder()
    mlflow_error = LmforgeError("the MLflow server refused the credentials")
    with pytest.raises(LmforgeError, match="refused the credentials"):
        runner._after_failed_start(_done(mlflow_error), ConnectionError("no Ray there"))
    assert runner.killed == 0, "no MLflow run exists to close"


def test_a_ray_failure_closes_the_runs_mlflow_opened():
    runner = _Recorder()
    runner._after_failed_start(_done(), ConnectionError("no Ray there"))  # the caller raises it
    assert runner.killed == 1


def test_ctrl_c_stays_ctrl_c_whatever_mlflow_did():
    runner = _Recorder()
    runner._after_failed_start(_done(LmforgeError("store locked")), KeyboardInterrupt())
    assert runner.killed == 0
    runner._after_failed_start(_done(), KeyboardInterrupt())
    assert runner.killed == 1
