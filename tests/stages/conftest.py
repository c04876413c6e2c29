"""Running one stage for real (Ray, MLflow sqlite, the artifact store) on small data."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmforge.pipeline.config_tree import compose, section
from lmforge.pipeline.engine.execute import StageTask, execute_stage, load_stages
from lmforge.pipeline.engine.keys import cache_key
from lmforge.pipeline.engine.tracking import client, ensure_experiment


@pytest.fixture
def local_ray(tmp_path_factory):
    """This process's local Ray runtime, started by the first test that needs it and kept for the
    stage modules after it (they are `shares_ray`: `tests/conftest.py`)."""
    import ray

    from lmforge.pipeline.cluster.ray_runtime import ensure_ray

    if not ray.is_initialized():
        ensure_ray(None, num_cpus=2, workdir=tmp_path_factory.mktemp("ray"))


@pytest.fixture(scope="session")
def stage_tracking(tmp_path_factory):
    """(tracking URI, client, experiment id): one MLflow store for every stage test. Each new
    sqlite store costs about 3 s of creating its tables, in the test and again in the Ray worker
    that runs the stage; each test still gets a run of its own."""
    root = tmp_path_factory.mktemp("tracking")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    mlflow = client(uri)
    return uri, mlflow, ensure_experiment(mlflow, "stages", (root / "art").as_uri())


@pytest.fixture
def run_stage(tmp_path, local_ray, stage_tracking):
    """run_stage(name, overrides, inputs={upstream: artifact dir}) -> (artifact dir, summary);
    `run_stage.tracking_uri` is the MLflow store its runs are in."""
    uri, mlflow, experiment = stage_tracking

    def run(name: str, overrides: list[str], inputs: dict | None = None):
        spec = load_stages()[name]
        config = compose(["preset=tiny", *overrides])
        sections = {path: section(config, path) for path in spec.config_sections}
        sizing = {path: section(config, path) for path in spec.sizing}
        inputs = inputs or {}
        input_keys = {k: v.name for k, v in inputs.items()}
        key = cache_key(name, spec.version, sections, input_keys)
        run_id = mlflow.create_run(experiment, run_name=name).info.run_id
        task = StageTask(
            stage=name,
            key=key,
            version=spec.version,
            sections=sections,
            typed_config=spec.parse_config({**sections, **sizing}),
            input_keys=input_keys,
            workdir=str(tmp_path),
            store_uri=None,
            tracking_uri=uri,
            mlflow_run_id=run_id,
        )
        result = execute_stage(task)
        return Path(result["artifact"]), result["summary"]

    run.tracking_uri = uri
    return run
