"""A sweep's MLflow run: the parent of its variants' pipeline runs, holding its summary.

Each variant's pipeline run nests under it with the swept keys as params of their own
(`engine.pipeline_runs.create_parent_run`), so the MLflow UI's compare view (parallel
coordinates, a metric against a param) works on the sweep as it stands. A rerun of the same
sweep reopens the same run.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from lmforge.pipeline.engine.pipeline_runs import log_params
from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.engine.tracking import (
    client,
    default_artifact_location,
    ensure_experiment,
    store_creation_lock,
)
from lmforge.pipeline.sweep.records import SweepRecord

log = logging.getLogger("lmforge")


def open_sweep_run(tracking_uri: str, workdir: Path, experiment: str, record: SweepRecord):
    """(client, run id) of the sweep's MLflow run: the one its record names, RUNNING again,
    or a new one with the swept keys' values and the early-stopping settings as params."""
    location = default_artifact_location(workdir, tracking_uri)
    with store_creation_lock(tracking_uri):
        mlflow = client(tracking_uri)
        experiment_id = ensure_experiment(mlflow, experiment, location)
    if record.mlflow_run_id:
        try:
            mlflow.update_run(record.mlflow_run_id, status="RUNNING")
            return mlflow, record.mlflow_run_id
        except Exception as exc:  # deleted meanwhile: a new one
            log.warning(
                "sweep run %s not found in MLflow (%s); starting a new one",
                record.mlflow_run_id,
                exc,
            )
    run = mlflow.create_run(
        experiment_id,
        run_name=record.sweep_id,
        tags={
            "lmforge.sweep": record.sweep_id,
            "lmforge.command": record.command,
            "lmforge.swept": ",".join(record.swept),
        },
    )
    params: dict[str, Any] = {
        key: ",".join(sorted({v.params[key] for v in record.variants})) for key in record.swept
    }
    params["variants"] = len(record.variants)
    for name, value in (record.early_stop or {}).items():
        params[f"early_stop.{name}"] = value
    log_params(mlflow, run.info.run_id, params)
    return mlflow, run.info.run_id


def close_sweep_run(mlflow, run_id: str, summary_dir: Path, best: dict[str, float], failed: bool):
    """Log the summary (its table and plots) and the best figures; close the run."""
    for name, value in best.items():
        mlflow.log_metric(run_id, name, value)
    for path in sorted(summary_dir.iterdir()):
        if path.is_file():
            mlflow.log_artifact(run_id, str(path), artifact_path="summary")
    mlflow.set_terminated(run_id, status="FAILED" if failed else "FINISHED")


def log_variant_figures(mlflow, run_id: str | None, figures: dict, wall_s: float | None) -> None:
    """A variant's figures as metrics of its pipeline run, for the compare view."""
    values = {k: v for k, v in figures.items() if isinstance(v, int | float) and math.isfinite(v)}
    if wall_s is not None:
        values["wall_s"] = wall_s
    try:
        for name, value in values.items():
            mlflow.log_metric(run_id, name, float(value))
    except Exception as exc:
        log.warning("could not log the variant's figures to MLflow: %s", exc)


def mark_stopped_attempt(mlflow, pipeline: PipelineRecord, step: int) -> None:
    """The pipeline run a sweep stopped is KILLED in MLflow, not FAILED (it did as asked), its
    pipeline and pretrain runs tagged `lmforge.stopped_at`."""
    try:
        pretrain = pipeline.stage("pretrain").mlflow_run_id
        for run_id in (pipeline.mlflow_run_id, pretrain):
            if run_id:
                mlflow.set_tag(run_id, "lmforge.stopped_at", str(step))
                mlflow.update_run(run_id, status="KILLED")
    except Exception as exc:
        log.warning("could not mark the stopped run in MLflow: %s", exc)


def tag_stopped(mlflow, pipeline: PipelineRecord, step: int | None) -> None:
    """A stopped variant's runs say so: its pipeline run (`lmforge.stopped_at`), and the runs
    of its stages that read its model (`lmforge.upstream_stopped`)."""
    text = f"pretrain stopped early at step {step}"
    try:
        if pipeline.mlflow_run_id:
            mlflow.set_tag(pipeline.mlflow_run_id, "lmforge.stopped_at", str(step))
        below = pipeline.stages[[s.stage for s in pipeline.stages].index("pretrain") + 1 :]
        for stage in below:
            if stage.mlflow_run_id:
                mlflow.set_tag(stage.mlflow_run_id, "lmforge.upstream_stopped", text)
    except Exception as exc:
        log.warning("could not tag the stopped variant's runs in MLflow: %s", exc)
