"""Running one stage inside a Ray worker: temporary directory, stage function, atomic commit.

The runner creates the stage's MLflow run; this code writes to it and sets its final status
(FINISHED or FAILED) itself, so a stage that raised never shows as finished. Once the artifact is
committed the stage has succeeded: a tracking failure after that is retried and, if it persists,
returned as a warning (the run is closed FINISHED later), never turned into a FAILED run beside a
committed artifact.
"""

from __future__ import annotations

import importlib
import json
import logging
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_peak_rss_bytes
from lmforge.pipeline.engine.commit_fault import maybe_kill_after_commit, task_environment
from lmforge.pipeline.engine.source_instances import SOURCES, base_name, source_of
from lmforge.pipeline.engine.stage import StageContext, StageSpec, registered_stages
from lmforge.pipeline.engine.tracking import RunTracker
from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.estimate.measured import metrics as estimate_metrics
from lmforge.pipeline.redaction import redact_text, redact_value
from lmforge.pipeline.storage.artifact_store import MANIFEST, open_store
from lmforge.pipeline.storage.leases.lease import LeaseSettings
from lmforge.pipeline.storage.settings import StoreSettings

STAGES_PACKAGE = "lmforge.pipeline.stages"


@dataclass(slots=True)
class StageTask:
    """Everything a worker needs to run one stage (picklable)."""

    stage: str
    key: str
    version: str
    sections: dict[str, Any]
    typed_config: Any
    input_keys: dict[str, str]
    workdir: str
    store_uri: str | None
    tracking_uri: str
    mlflow_run_id: str
    store: StoreSettings | None = None
    """Block size and node cache (`cluster.store_block_mb`, `cluster.cache`); None: defaults."""
    pipeline_run: str = ""
    """The pipeline run's id (its Ray Train storage is a directory of its own)."""
    rebuild: bool = False
    """Replace an artifact committed under this key (a rerun, a damaged or too small copy);
    otherwise one found committed at the commit is kept and this attempt's output dropped."""
    leases: LeaseSettings | None = None
    """Renewal and expiry of the leases the stage takes itself (`StageContext.holding`)."""
    lease_wait_s: float | None = None
    """How long the stage waits for such a lease that another run holds (`--lease-wait`)."""


def load_stages() -> dict:
    """Import the stage modules (they register themselves) and return the registry."""
    importlib.import_module(STAGES_PACKAGE)
    return registered_stages()


def execute_stage(task: StageTask) -> dict[str, Any]:
    """Run the stage, commit its artifact, finish its MLflow run; returns artifact and summary."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    spec = load_stages()[base_name(task.stage)]
    settings = task.store or StoreSettings.defaults(Path(task.workdir))
    store = open_store(task.store_uri, Path(task.workdir), settings)
    tracker = RunTracker(task.tracking_uri, task.mlflow_run_id)
    tmp = store.begin(task.stage, task.key)
    reset_peak_rss()  # a reused worker's earlier peaks are not this stage's
    started = time.time()
    try:
        input_manifests = {
            name: _manifest(store, name, key) for name, key in task.input_keys.items()
        }
        inputs = {  # opened lazily: with a bucket, files are fetched as the stage reads them
            name: store.open_input(name, key, input_manifests[name])
            for name, key in task.input_keys.items()
        }
        for name, opened in inputs.items():  # a local input is pinned: its copy's manifest
            if isinstance(opened, Path):
                input_manifests[name] = json.loads((opened / MANIFEST).read_bytes())
        ctx = StageContext(
            stage=task.stage,
            config=task.typed_config,
            inputs=inputs,
            input_manifests=input_manifests,
            out_dir=tmp,
            tracker=tracker,
            workdir=Path(task.workdir),
            key=task.key,
            final_dir=store.local_path(task.stage, task.key),
            mlflow_run_id=task.mlflow_run_id,
            tracking_uri=task.tracking_uri,
            store_uri=task.store_uri,
            output=store.output(tmp),
            store=settings,
            pipeline_run=task.pipeline_run,
            source=source_of(task.stage),
            sources=list(task.sections.get(SOURCES) or []),
            leases=task.leases,
            lease_wait_s=task.lease_wait_s,
        )
        summary = spec.fn(ctx) or {}
        finished = time.time()
        estimate = _estimate_record(
            task, summary, input_manifests, finished - started, tmp, ctx.written
        )
        manifest = {
            "stage": task.stage,
            "key": task.key,
            "version": task.version,
            "config": redact_value(task.sections),  # a record: secrets masked
            "inputs": {
                name: {"key": key, "path": str(store.path(name, key))}
                for name, key in task.input_keys.items()
            },
            "summary": summary,
            "mlflow_run_id": task.mlflow_run_id,
            "started_at": started,
            "finished_at": finished,
            "duration_s": round(finished - started, 3),
            "estimate": estimate,
        }
        final = store.commit(tmp, task.stage, task.key, manifest, ctx.written, rebuild=task.rebuild)
    except BaseException as exc:
        store.release_inputs()
        store.abort(tmp)
        try:
            error = redact_text(f"{type(exc).__name__}: {exc}")[:5000]
            tracker.set_tags({"lmforge.error": error})
            # Ctrl-C reaches the stage's process too: its run is KILLED, as the driver marks it,
            # whichever of the two writes last.
            tracker.terminate(_end_status(exc))
        except Exception:  # the original failure matters more than a tracking hiccup
            logging.getLogger(__name__).warning(
                "could not mark run %s:\n%s", _end_status(exc), traceback.format_exc()
            )
        raise
    store.release_inputs()
    maybe_kill_after_commit(task.stage)
    warning = _close_run(
        tracker,
        {**summary, **estimate_metrics(estimate)},
        lambda: _log_manifest(tracker, store, task.stage, task.key),
    )
    return {
        "artifact": str(final),
        "summary": summary,
        "duration_s": finished - started,
        "warning": warning,
    }


def _estimate_record(
    task: StageTask,
    summary: dict,
    input_manifests: dict,
    seconds: float,
    out_dir: Path,
    written: list[dict],
) -> dict[str, Any]:
    """Measured time and peak memory next to what `lmforge estimate` predicts for this size."""
    from lmforge.pipeline.estimate.measured import cluster_now, directory_bytes, stage_record

    record = stage_record(
        stage=base_name(task.stage),
        sections=task.sections,
        summary=summary,
        input_manifests=input_manifests,
        measured_s=seconds,
        process_peak_mb=task_peak_rss_bytes() / 2**20,
        cluster=cluster_now(),
        workdir=Path(task.workdir),
    )
    # Files the tasks wrote straight into a bucket are not in the staging directory.
    elsewhere = sum(e["bytes"] for e in written if not (out_dir / e["path"]).exists())
    record["measured_artifact_bytes"] = directory_bytes(out_dir) + elsewhere
    return record


def _manifest(store, stage: str, key: str) -> dict[str, Any]:
    manifest = store.manifest(stage, key)
    if manifest is None:
        raise ArtifactError(f"{store.path(stage, key)} has no manifest: not a committed artifact")
    return manifest


def _log_manifest(tracker: RunTracker, store, stage: str, key: str) -> None:
    """Log the committed manifest to the run as `manifest.json`.

    A bucket store's manifest is copied to a temporary file first, removed once logged.
    """
    local = store.path(stage, key)
    if isinstance(local, Path) and (local / MANIFEST).is_file():
        tracker.log_artifact(local / MANIFEST)
        return
    with tempfile.TemporaryDirectory(prefix="lmforge-manifest-") as tmp:
        copy = Path(tmp) / MANIFEST
        copy.write_text(json.dumps(store.manifest(stage, key), indent=2, sort_keys=True))
        tracker.log_artifact(copy)


CLOSE_RETRY_DELAYS_S = (0.5, 2.0, 5.0)
"""Pauses between attempts to record a committed stage's metrics and close its run."""


def _close_run(
    tracker: RunTracker, summary: dict[str, Any], log_manifest: Callable[[], None]
) -> str | None:
    """Log metrics and the manifest, then mark the run FINISHED; None, or what failed."""
    numeric = {
        k: v for k, v in summary.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    steps = {
        "log metrics": lambda: tracker.log_metrics(numeric),
        "log the manifest": log_manifest,
        "mark the run FINISHED": lambda: tracker.terminate("FINISHED"),
    }
    failures = []
    for what, step in steps.items():
        for delay in (*CLOSE_RETRY_DELAYS_S, None):
            try:
                step()
                break
            except Exception as exc:  # a tracking hiccup: the artifact is committed all the same
                if delay is None:
                    failures.append(f"could not {what} ({type(exc).__name__}: {exc})"[:300])
                else:
                    time.sleep(delay)
    if not failures:
        return None
    return "artifact committed, but MLflow failed: " + "; ".join(failures)


def remote_stage(spec: StageSpec, typed_config: Any):
    """`execute_stage` as the Ray task of `spec`: its CPUs (`cpus_of` its config where it
    declares one) and GPUs, never retried (a stage resumes its own tasks), named for it."""
    import ray

    cpus = spec.cpus_of(typed_config) if spec.cpus_of else spec.num_cpus
    return ray.remote(execute_stage).options(
        num_cpus=cpus,
        num_gpus=spec.num_gpus,
        max_retries=0,
        name=f"stage:{spec.name}",
        **task_environment(),
    )


def failure_message(exc: BaseException) -> str:
    """One redacted line of a stage task's failure: the stage's own exception, which Ray's
    `RayTaskError` carries as its cause."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip()
    return redact_text(f"{type(cause).__name__}: {text.splitlines()[-1] if text else ''}")


def _end_status(exc: BaseException) -> str:
    """The MLflow status of a stage run its task left by `exc`: KILLED for an interruption
    (Ctrl-C, or Ray cancelling the task), FAILED otherwise."""
    interrupted = isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "TaskCancelledError"
    return "KILLED" if interrupted else "FAILED"
