"""MLflow lineage: one parent run per pipeline run, one nested child run per stage.

Everything goes through `MlflowClient` with explicit run ids (no fluent global state), so stage
runs created by the driver can be written to from Ray workers, and statuses are always set by us:
MLflow itself marks a crashed run FINISHED and leaves a killed one RUNNING.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.redaction import redact, redact_text

__all__ = ["redact"]  # re-exported: where params are logged, they are redacted

log = logging.getLogger(__name__)

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def resolve_tracking_uri(workdir: Path, configured: str | None) -> str:
    """MLFLOW_TRACKING_URI, else the configured URI, else a sqlite file under the workdir."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    if configured:
        return configured
    return f"sqlite:///{(workdir / 'mlflow.db').resolve()}"


def default_artifact_location(workdir: Path, tracking_uri: str) -> str | None:
    """Artifacts beside a local sqlite store; a server decides for itself."""
    if tracking_uri.startswith("sqlite:") or tracking_uri.startswith("file:"):
        return (workdir / "mlartifacts").resolve().as_uri()
    return None


def client(tracking_uri: str):
    """An MlflowClient for `tracking_uri` (imported lazily: mlflow is slow to import)."""
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if redact_text(tracking_uri) != tracking_uri:
        # MLflow prints each finished run's link built from the URI, credentials and all.
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def check_reachable(tracking_uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an unreachable tracking server (MLflow's own client retries for minutes)."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    import urllib.error
    import urllib.parse
    import urllib.request

    # The probe needs no credentials, and urllib takes `user:pass@` for part of the host name.
    parts = urllib.parse.urlsplit(tracking_uri.rstrip("/"))
    url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl() + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            pass
    except urllib.error.HTTPError:
        return  # it answered: reachable (authentication is checked by the first real call)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LmforgeError(
            f"cannot reach the MLflow tracking server at {redact_text(tracking_uri)} ({reason}); "
            "start it or fix MLFLOW_TRACKING_URI / cluster.tracking_uri"
        ) from exc


@contextlib.contextmanager
def store_creation_lock(tracking_uri: str) -> Iterator[None]:
    """Around a run's first use of the tracking store: with a sqlite file, an exclusive flock
    on `.<file>.lock` beside it (in the workdir by default), so that of two runs starting on a
    fresh workdir one creates and migrates the database while the other waits. A server
    creates its own store."""
    if not tracking_uri.startswith("sqlite:///"):
        yield
        return
    database = Path(tracking_uri.removeprefix("sqlite:///").split("?")[0])  # relative: to cwd
    database.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(database.parent / f".{database.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel even on SIGKILL
        yield
    finally:
        os.close(fd)


def ensure_experiment(mlflow_client, name: str, artifact_location: str | None) -> str:
    """The experiment's id, created with the tag that opens the MLflow 3 UI on training runs
    (when another run creates it at the same time, theirs). A server that is down is the
    caller's to find first (`check_reachable`): MLflow's own client retries for minutes."""
    try:
        experiment = mlflow_client.get_experiment_by_name(name)
        if experiment is None:
            experiment_id = _create_experiment(mlflow_client, name, artifact_location)
        else:
            experiment_id = experiment.experiment_id
            if experiment.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
                mlflow_client.set_experiment_tag(
                    experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND
                )
    except Exception as exc:  # any transport or store error: name the URI and what to do
        uri = redact_text(mlflow_client.tracking_uri)
        if any(code in str(exc) for code in ("401", "403")):
            raise LmforgeError(
                f"the MLflow server at {uri} refused the credentials: set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            ) from exc
        raise LmforgeError(
            f"cannot reach the MLflow tracking store at {uri}: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:200]}; check MLFLOW_TRACKING_URI / cluster.tracking_uri"
        ) from exc
    return experiment_id


def _create_experiment(mlflow_client, name: str, artifact_location: str | None) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return mlflow_client.create_experiment(
            name, artifact_location=artifact_location, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
        )
    except MlflowException:
        created = mlflow_client.get_experiment_by_name(name)  # another run created it first
        if created is None:
            raise
        return created.experiment_id


def close_producing_run(mlflow_client, run_id: str) -> bool:
    """Mark FINISHED the run that produced a committed artifact if it says otherwise.

    Its stage committed the artifact, so it succeeded; only closing its run failed (a tracking
    outage, or the driver died in between). Returns whether the run was fixed.
    """
    from mlflow.exceptions import MlflowException

    try:
        run = mlflow_client.get_run(run_id)
    except MlflowException:  # deleted, or recorded in another tracking store
        return False
    if run.info.status == "FINISHED":
        return False
    mlflow_client.set_tag(run_id, "lmforge.closed_after_commit", run.info.status)
    mlflow_client.set_terminated(run_id, status="FINISHED")
    return True


class RunTracker:
    """The stage's view of its MLflow run (implements `pipeline.stage.Tracker`)."""

    def __init__(self, tracking_uri: str, run_id: str) -> None:
        self.tracking_uri = tracking_uri
        self.run_id = run_id
        self._client = client(tracking_uri)

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [
            Metric(key=k, value=float(v), timestamp=now, step=step or 0)
            for k, v in metrics.items()
            if v is not None
        ]
        if batch:
            self._client.log_batch(self.run_id, metrics=batch)

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        flat = redact(params)
        batch = [Param(k, str(v)[:6000]) for k, v in flat.items()]
        for start in range(0, len(batch), 100):
            self._client.log_batch(self.run_id, params=batch[start : start + 100])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self._client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self._client.log_artifact(self.run_id, str(path), artifact_path)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        for k, v in tags.items():
            self._client.set_tag(self.run_id, k, str(v))

    def terminate(self, status: str) -> None:
        """Set the run's final status: FINISHED, FAILED or KILLED."""
        self._client.set_terminated(self.run_id, status=status)

    def log_dataset(self, path: Path, name: str, digest: str, context: str) -> None:
        """Record a dataset (e.g. the cleaned Parquet split) as an input of this run."""
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.data.sources import LocalArtifactDatasetSource
        from mlflow.entities import DatasetInput, InputTag

        dataset = MetaDataset(
            source=LocalArtifactDatasetSource(str(path)), name=name, digest=digest[:36]
        )
        entity = DatasetInput(
            dataset=dataset._to_mlflow_entity(),
            tags=[InputTag(key="mlflow.data.context", value=context)],
        )
        self._client.log_inputs(self.run_id, datasets=[entity])
