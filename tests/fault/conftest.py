"""Fixtures of the kill-and-resume tests: a local Ray per module, shards, the reference run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray
from fault.training_runs import BASE, Runs, write_token_shards
from filelock import FileLock

from lmforge.pipeline.cluster.ray_runtime import LOCAL_DEFAULTS, WITHOUT_DASHBOARD_DEFAULTS
from lmforge.pipeline.training.trainer import PG_CLEANER_ENV, RESOURCE_REQUESTS_ENV


@pytest.fixture(scope="session")
def token_shards(tmp_path_factory) -> Path:
    return write_token_shards(tmp_path_factory.mktemp("shards"))


@pytest.fixture(scope="module")
def ray_session():
    """A local runtime as the pipeline's: Ray Train asks no autoscaling coordinator and starts
    no placement-group cleaner (there is no dashboard for it to poll)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(RESOURCE_REQUESTS_ENV, LOCAL_DEFAULTS[RESOURCE_REQUESTS_ENV])
        env.setenv(PG_CLEANER_ENV, WITHOUT_DASHBOARD_DEFAULTS[PG_CLEANER_ENV])
        ray.init(address="local", num_cpus=2, include_dashboard=False)
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, token_shards, ray_session) -> Runs:
    return Runs(tmp_path_factory.mktemp("runs"), token_shards)


@pytest.fixture
def reference(runs, tmp_path_factory, worker_id) -> dict:
    """The uninterrupted 2-worker ZeRO-2 run of BASE, trained once per test session: the first
    pytest-xdist worker to ask trains it and leaves its summary (JSON) where the other workers'
    temporary directories meet; they wait on the lock and read it (a run is a minute of CPU)."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent
    path = shared / "fault-reference.json"
    with FileLock(f"{path}.lock"):
        if not path.exists():
            summary = runs.train("reference", BASE)
            partial = path.with_suffix(".partial")
            partial.write_text(json.dumps(summary, default=str), encoding="utf-8")
            partial.replace(path)
    return json.loads(path.read_text(encoding="utf-8"))
