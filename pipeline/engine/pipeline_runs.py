"""The MLflow runs of a pipeline run: its experiment, its parent run and one nested run per
stage, each with its lineage tags and its config as params (`PipelineTracking` holds them for
the runner)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lmforge.pipeline.engine.driver import HEARTBEAT_TAG, HeartbeatWatch, driver_tags
from lmforge.pipeline.engine.driver_watch import DriverWatch, kill_runs_of_dead_drivers
from lmforge.pipeline.engine.plan import StagePlan
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook
from lmforge.pipeline.engine.run_request import SweepLink
from lmforge.pipeline.engine.tracking import (
    client,
    close_producing_run,
    default_artifact_location,
    ensure_experiment,
    redact,
    store_creation_lock,
)

log = logging.getLogger("lmforge")


def open_experiment(
    tracking_uri: str, workdir: Path, name: str, heartbeats: HeartbeatWatch
) -> tuple[Any, str]:
    """(client, experiment id) of `name`, made (with a new store's schema) under the store's
    lock; the runs of drivers known to be dead are closed as KILLED."""
    location = default_artifact_location(workdir, tracking_uri)
    with store_creation_lock(tracking_uri):
        mlflow = client(tracking_uri)
        experiment_id = ensure_experiment(mlflow, name, location)
    stale = kill_runs_of_dead_drivers(mlflow, experiment_id, heartbeats)
    if stale:
        log.info("marked %d MLflow run(s) left RUNNING by a dead driver as KILLED", stale)
    return mlflow, experiment_id


def log_params(mlflow, run_id: str, params: dict[str, Any]) -> None:
    """`params` (redacted, values cut at MLflow's limit) in batches MLflow accepts."""
    from mlflow.entities import Param

    flat = [Param(k, str(v)[:6000]) for k, v in redact(params).items()]
    for start in range(0, len(flat), 100):
        mlflow.log_batch(run_id, params=flat[start : start + 100])


def create_parent_run(
    mlflow,
    experiment_id: str,
    record: PipelineRecord,
    command: str,
    config: dict[str, Any],
    sweep: SweepLink | None = None,
) -> str:
    """The pipeline run's parent run, naming its driver, with the whole config as params; a
    sweep's variant nests under the sweep's run, with the swept keys as params of their own."""
    tags = {
        "lmforge.pipeline_run": record.run_id,
        "lmforge.command": command,
        **driver_tags(record.driver or {}),
        HEARTBEAT_TAG: "0",
    }
    name = f"pipeline-{record.run_id}"
    if sweep is not None:
        tags |= {
            "mlflow.parentRunId": sweep.parent_run_id,
            "lmforge.sweep": sweep.sweep_id,
            "lmforge.variant": sweep.variant,
        }
        name = f"{sweep.variant}-{record.run_id}"
    parent = mlflow.create_run(experiment_id, run_name=name, tags=tags)
    log_params(mlflow, parent.info.run_id, {**config, **(sweep.params if sweep else {})})
    return parent.info.run_id


def quietly(fn, *args, **kwargs) -> None:
    """Call an MLflow update on a best-effort basis (while shutting down): the next run fixes
    what it could not."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:
        log.warning("could not update MLflow: %s", exc)


class PipelineTracking:
    """A pipeline run's MLflow side: its experiment (the runs of dead drivers closed first), its
    parent run naming the driver, a nested run per stage, and the watch that beats this driver's
    heartbeat and closes the runs of drivers that die meanwhile."""

    def __init__(
        self,
        tracking_uri: str,
        workdir: Path,
        experiment: str,
        heartbeats: HeartbeatWatch,
        heartbeat_s: float,
    ) -> None:
        self.uri, self.workdir, self.experiment = tracking_uri, workdir, experiment
        self.heartbeats, self.heartbeat_s = heartbeats, heartbeat_s
        self.mlflow: Any = None
        self.experiment_id = ""
        self.parent_id = ""
        self.watch: DriverWatch | None = None

    def open(
        self, record: PipelineRecord, command: str, config: dict[str, Any], sweep: SweepLink | None
    ) -> str:
        """The experiment and the parent run; returns the parent run's id."""
        self.mlflow, self.experiment_id = open_experiment(
            self.uri, self.workdir, self.experiment, self.heartbeats
        )
        self.parent_id = create_parent_run(
            self.mlflow, self.experiment_id, record, command, config, sweep
        )
        return self.parent_id

    def watch_drivers(self, book: RecordBook, own_run: str) -> None:
        """Beat this driver's heartbeat and close dead drivers' runs until `stop`."""
        self.watch = DriverWatch(
            self.uri,
            self.experiment_id,
            self.parent_id,
            heartbeat_s=self.heartbeat_s,
            watch=self.heartbeats,
            book=book,
            own_run=own_run,
        ).start()

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    def stage_run(
        self,
        record: PipelineRecord,
        name: str,
        stage_plan: StagePlan,
        *,
        cached: bool,
        source_run_id: str | None,
    ) -> str:
        """A stage's nested run: its key, its inputs' keys and runs, whether it is a cache hit (and
        the run that made the artifact), its config sections as params."""
        tags = {
            "mlflow.parentRunId": self.parent_id,
            "lmforge.stage": name,
            "lmforge.cache_key": stage_plan.key,
            "lmforge.inputs": ",".join(f"{k}={v}" for k, v in stage_plan.input_keys.items()),
            "lmforge.cached": str(cached).lower(),
            "lmforge.pipeline_run": record.run_id,
        }
        upstream_runs = {u: record.stage(u).mlflow_run_id for u in stage_plan.input_keys}
        tags["lmforge.input_runs"] = ",".join(f"{k}={v}" for k, v in upstream_runs.items())
        if source_run_id:
            tags["lmforge.source_run_id"] = source_run_id
        run = self.mlflow.create_run(self.experiment_id, run_name=name, tags=tags)
        log_params(self.mlflow, run.info.run_id, stage_plan.sections)
        return run.info.run_id

    def close(self, run_id: str, status: str) -> None:
        self.mlflow.set_terminated(run_id, status=status)

    def close_if_running(self, run_id: str, status: str) -> None:
        """Close a stage run its task may have closed already (then it keeps that status)."""
        if self.mlflow.get_run(run_id).info.status == "RUNNING":
            self.close(run_id, status)

    def finish_producing(self, run_id: str) -> bool:
        """Close as FINISHED the run that produced an artifact, if it was left open; whether
        it was."""
        return close_producing_run(self.mlflow, run_id)
