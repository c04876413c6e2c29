"""A stage that raises leaves no visible artifact and a FAILED MLflow run."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmforge.pipeline.engine.execute import StageTask, execute_stage
from lmforge.pipeline.engine.stage import stage, unregister_stage
from lmforge.pipeline.engine.tracking import client, ensure_experiment
from lmforge.pipeline.storage.artifact_store import ArtifactStore


def _explodes_halfway(ctx):
    (ctx.out_dir / "half-written.parquet").write_text("partial")
    raise RuntimeError("disk on fire")


def _fails_naming_a_secret_uri(ctx):
    raise RuntimeError(f"cannot open https://alice:{PASSWORD}@data.example/x.jsonl")


def _writes_one_file(ctx):
    (ctx.out_dir / "result.txt").write_text("ok")
    return {"n": 1}


def _interrupted_halfway(ctx):
    (ctx.out_dir / "half-written.parquet").write_text("partial")
    raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def throwaway_stages():
    stages = (_explodes_halfway, _fails_naming_a_secret_uri, _writes_one_file, _interrupted_halfway)
    for fn in stages:
        stage(name=fn.__name__, version="1")(fn)
    yield
    for fn in stages:
        unregister_stage(fn.__name__)


PASSWORD = "s3cret-Pa55"


def _task(name, workdir, sections=None, store_uri=None):
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = ensure_experiment(mlflow, "test", (workdir / "art").as_uri())
    run = mlflow.create_run(experiment, run_name=name)
    task = StageTask(
        stage=name,
        key="k1",
        version="1",
        sections=sections or {},
        typed_config={},
        input_keys={},
        workdir=str(workdir),
        store_uri=store_uri,
        tracking_uri=uri,
        mlflow_run_id=run.info.run_id,
    )
    return task, mlflow


def test_a_stage_that_raises_leaves_no_visible_artifact_and_a_failed_run(workdir):
    task, mlflow = _task("_explodes_halfway", workdir)
    with pytest.raises(RuntimeError, match="disk on fire"):
        execute_stage(task)
    store = ArtifactStore(workdir / "store")
    assert not store.exists("_explodes_halfway", "k1")
    assert not list((workdir / "store").rglob("half-written.parquet"))
    run = mlflow.get_run(task.mlflow_run_id)
    assert run.info.status == "FAILED"
    assert "disk on fire" in run.data.tags["lmforge.error"]


def test_a_stage_interrupted_by_ctrl_c_leaves_no_visible_artifact_and_a_killed_run(workdir):
    """Ctrl-C reaches the stage's process as well as the driver: both close its run KILLED."""
    task, mlflow = _task("_interrupted_halfway", workdir)
    with pytest.raises(KeyboardInterrupt):
        execute_stage(task)
    assert not ArtifactStore(workdir / "store").exists("_interrupted_halfway", "k1")
    assert not list((workdir / "store").rglob("half-written.parquet"))
    assert mlflow.get_run(task.mlflow_run_id).info.status == "KILLED"


def test_a_stage_that_succeeds_is_committed_with_its_summary_and_finished(workdir):
    task, mlflow = _task("_writes_one_file", workdir)
    result = execute_stage(task)
    manifest = ArtifactStore(workdir / "store").manifest("_writes_one_file", "k1")
    assert manifest["summary"] == {"n": 1}
    assert manifest["mlflow_run_id"] == task.mlflow_run_id
    assert result["artifact"].endswith("_writes_one_file/k1")
    assert mlflow.get_run(task.mlflow_run_id).info.status == "FINISHED"


def test_a_stage_committed_to_a_bucket_logs_its_manifest_and_leaves_no_temporary_copy(
    workdir, s3_in_env, tmp_path, monkeypatch
):
    """The run gets the bucket's manifest as `manifest.json`; the local copy made to log it is
    removed (one was left in the temporary directory per stage)."""
    import json
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    task, mlflow = _task("_writes_one_file", workdir, store_uri="s3://lmforge/store")
    execute_stage(task)
    assert mlflow.get_run(task.mlflow_run_id).info.status == "FINISHED"
    logged = mlflow.download_artifacts(task.mlflow_run_id, "manifest.json", str(tmp_path))
    assert json.loads(Path(logged).read_text())["summary"] == {"n": 1}
    assert [p.name for p in scratch.iterdir()] == []


def test_secrets_in_a_stage_config_or_error_are_masked_in_its_manifest_and_run(workdir):
    """The manifest records the stage's config, and the run its error, with secrets masked."""
    sections = {"data": {"paths": [f"https://alice:{PASSWORD}@data.example/x.jsonl"]}}
    task, mlflow = _task("_writes_one_file", workdir, sections)
    execute_stage(task)
    manifest = ArtifactStore(workdir / "store").manifest("_writes_one_file", "k1")
    assert manifest["config"] == {"data": {"paths": ["https://alice:***@data.example/x.jsonl"]}}
    task, mlflow = _task("_fails_naming_a_secret_uri", workdir)
    with pytest.raises(RuntimeError):
        execute_stage(task)
    error = mlflow.get_run(task.mlflow_run_id).data.tags["lmforge.error"]
    assert "alice:***@data.example" in error and PASSWORD not in error
    leaks = [p for p in workdir.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert leaks == []


@pytest.fixture
def tracking_fails_to_close(monkeypatch):
    """Closing a run FINISHED fails `failures[0]` times (a tracking hiccup), then works."""
    from lmforge.pipeline.engine import execute
    from lmforge.pipeline.engine.tracking import RunTracker

    monkeypatch.setattr(execute, "CLOSE_RETRY_DELAYS_S", (0.0, 0.0, 0.0))
    real = RunTracker.terminate
    failures = [1]

    def terminate(self, status):
        if status == "FINISHED" and failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("tracking server unreachable")
        real(self, status)

    monkeypatch.setattr(RunTracker, "terminate", terminate)
    return failures


def test_a_tracking_hiccup_after_the_commit_is_retried_and_the_run_finishes(
    workdir, tracking_fails_to_close
):
    task, mlflow = _task("_writes_one_file", workdir)
    result = execute_stage(task)
    assert result["warning"] is None
    assert ArtifactStore(workdir / "store").exists("_writes_one_file", "k1")
    assert mlflow.get_run(task.mlflow_run_id).info.status == "FINISHED"


def test_a_run_that_cannot_be_closed_never_says_failed_beside_a_committed_artifact(
    workdir, tracking_fails_to_close
):
    from lmforge.pipeline.engine.driver import HeartbeatWatch
    from lmforge.pipeline.engine.driver_watch import kill_runs_of_dead_drivers
    from lmforge.pipeline.engine.tracking import close_producing_run

    tracking_fails_to_close[0] = 100
    task, mlflow = _task("_writes_one_file", workdir)
    result = execute_stage(task)
    assert "could not mark the run FINISHED" in result["warning"]
    manifest = ArtifactStore(workdir / "store").manifest("_writes_one_file", "k1")
    assert manifest["mlflow_run_id"] == task.mlflow_run_id
    run = mlflow.get_run(task.mlflow_run_id)
    assert run.info.status == "RUNNING"
    # the next pipeline run starts ...
    kill_runs_of_dead_drivers(mlflow, run.info.experiment_id, HeartbeatWatch())
    assert close_producing_run(mlflow, task.mlflow_run_id)  # ... and reuses the artifact
    assert mlflow.get_run(task.mlflow_run_id).info.status == "FINISHED"
    assert not close_producing_run(mlflow, task.mlflow_run_id)
