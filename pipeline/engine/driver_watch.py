"""The driver's watch over one MLflow experiment: its own heartbeat, and the runs of dead drivers.

Several pipelines may share a tracking server, each with its runs RUNNING. A run therefore marks
KILLED only the runs whose driver is known to be dead (`driver.driver_dead`): a pipeline's parent
run by its own driver tags, a stage run by its parent's. At the start of a run one sweep closes
the runs of dead drivers of this host; while the run lives, a background thread raises its
heartbeat every `heartbeat_s` seconds and sweeps again, so a driver of another host whose
heartbeat stops is closed once this run has watched it for the expiry time. Runs without the
`lmforge.pipeline_run` tag are not lmforge's, and never touched.

The workdir's run records follow the same judgement (`close_records_of_dead_drivers`): a record
left `running` by a driver of another host (runs sharing a workdir on a shared path) becomes
`killed` once the heartbeat of its parent run stood still for the expiry time here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from lmforge.pipeline.engine.driver import (
    EXPIRE_S,
    HEARTBEAT_S,
    HEARTBEAT_TAG,
    HeartbeatWatch,
    alive_here,
    driver_dead,
    driver_of_tags,
    record_driver_dead,
)
from lmforge.pipeline.engine.run_records import RecordBook

log = logging.getLogger("lmforge")

PIPELINE_RUN_TAG = "lmforge.pipeline_run"
PARENT_TAG = "mlflow.parentRunId"


def _pipeline_run_of(run_id: str, tags: Mapping[str, str]) -> str:
    """The run whose driver tags judge `run_id`: itself where it names its driver (a pipeline's
    parent run, nested or not: a sweep's variants nest under the sweep's run, which names no
    driver), else its parent (a stage run)."""
    if HEARTBEAT_TAG in tags or driver_of_tags(tags) is not None:
        return run_id
    return tags.get(PARENT_TAG, run_id)


def kill_runs_of_dead_drivers(
    mlflow_client,
    experiment_id: str,
    watch: HeartbeatWatch,
    *,
    own_parent: str | None = None,
    now: float | None = None,
) -> int:
    """Mark KILLED the RUNNING lmforge runs of `experiment_id` whose driver is known to be dead
    (never those of `own_parent`'s pipeline); returns how many."""
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    now = time.monotonic() if now is None else now
    running = mlflow_client.search_runs(
        [experiment_id],
        filter_string="attributes.status = 'RUNNING'",
        run_view_type=ViewType.ACTIVE_ONLY,
        max_results=1000,
    )
    ours = [r for r in running if PIPELINE_RUN_TAG in r.data.tags]
    tags_of: dict[str, dict[str, str]] = {
        r.info.run_id: r.data.tags
        for r in ours
        if _pipeline_run_of(r.info.run_id, r.data.tags) == r.info.run_id
    }
    verdicts: dict[str, bool] = {}
    killed = 0
    for run in ours:
        parent = _pipeline_run_of(run.info.run_id, run.data.tags)
        if parent == own_parent:
            continue
        if parent not in verdicts:
            if parent not in tags_of:
                try:
                    tags_of[parent] = mlflow_client.get_run(parent).data.tags
                except MlflowException:  # the parent was deleted: the child's driver is unknown
                    tags_of[parent] = {}
            verdicts[parent] = bool(tags_of[parent]) and driver_dead(
                parent, tags_of[parent], watch, now
            )
        if verdicts[parent]:
            mlflow_client.set_terminated(run.info.run_id, status="KILLED")
            killed += 1
    return killed


def close_records_of_dead_drivers(
    book: RecordBook,
    mlflow_client,
    watch: HeartbeatWatch,
    *,
    own_run: str | None = None,
    now: float | None = None,
) -> int:
    """Mark `killed` the run records of `book` left running by a driver known to be dead
    (`driver.record_driver_dead`; never `own_run`'s); returns how many."""
    from mlflow.exceptions import MlflowException

    now = time.monotonic() if now is None else now
    closed = 0
    for record in book.all():
        if record.state != "running" or record.run_id == own_run:
            continue
        tags = None
        if record.driver is not None and alive_here(record.driver) is None:
            try:  # a driver of another host: judged by its parent run's heartbeat
                tags = mlflow_client.get_run(record.mlflow_run_id).data.tags
            except (MlflowException, TypeError):  # deleted, or no parent run recorded
                tags = None
        if record_driver_dead(record.driver, record.mlflow_run_id, tags, watch, now):
            closed += book.mark_killed(record.run_id)
    return closed


class DriverWatch:
    """A background thread: this driver's heartbeat on its parent run, and a sweep of the runs
    of dead drivers, every `heartbeat_s` seconds until `stop`."""

    def __init__(
        self,
        tracking_uri: str,
        experiment_id: str,
        parent_run_id: str,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        expire_s: float = EXPIRE_S,
        watch: HeartbeatWatch | None = None,
        book: RecordBook | None = None,
        own_run: str | None = None,
    ) -> None:
        """book: the workdir's run records, whose dead drivers' records it closes too (not
        `own_run`'s)."""
        self.tracking_uri, self.experiment_id = tracking_uri, experiment_id
        self.parent_run_id, self.heartbeat_s = parent_run_id, heartbeat_s
        self.watch = watch or HeartbeatWatch(expire_s)
        self.book, self.own_run = book, own_run
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beats = 0

    def start(self) -> DriverWatch:
        self._thread = threading.Thread(target=self._loop, name="lmforge-driver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        from lmforge.pipeline.engine.tracking import client

        mlflow = client(self.tracking_uri)
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.beat(mlflow)
            except Exception as exc:  # a tracking hiccup: the next beat tries again
                log.debug("driver heartbeat failed: %s", exc)

    def beat(self, mlflow: Any) -> int:
        """Raise the heartbeat once and sweep once; returns how many runs were marked KILLED."""
        self._beats += 1
        mlflow.set_tag(self.parent_run_id, HEARTBEAT_TAG, str(self._beats))
        killed = kill_runs_of_dead_drivers(
            mlflow, self.experiment_id, self.watch, own_parent=self.parent_run_id
        )
        if killed:
            log.info("marked %d MLflow run(s) of a dead driver as KILLED", killed)
        if self.book is not None:
            closed = close_records_of_dead_drivers(
                self.book, mlflow, self.watch, own_run=self.own_run
            )
            if closed:
                log.info("marked %d pipeline run(s) of a dead driver as killed", closed)
        return killed
