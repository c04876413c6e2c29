"""Fixtures of the kill-and-resume tests: a local Ray per module, shards, the reference run."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray
from fault.training_runs import BASE, Runs, write_token_shards

from lmforge.pipeline.ray_runtime import LOCAL_DEFAULTS
from lmforge.pipeline.training.trainer import RESOURCE_REQUESTS_ENV


@pytest.fixture(scope="session")
def token_shards(tmp_path_factory) -> Path:
    return write_token_shards(tmp_path_factory.mktemp("shards"))


@pytest.fixture(scope="module")
def ray_session():
    """A local runtime as the pipeline's: Ray Train asks no autoscaling coordinator."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(RESOURCE_REQUESTS_ENV, LOCAL_DEFAULTS[RESOURCE_REQUESTS_ENV])
        ray.init(address="local", num_cpus=2, include_dashboard=False)
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, token_shards, ray_session) -> Runs:
    return Runs(tmp_path_factory.mktemp("runs"), token_shards)


_REFERENCE: dict[str, dict] = {}


@pytest.fixture
def reference(runs) -> dict:
    """The uninterrupted 2-worker ZeRO-2 run of BASE (computed once per session)."""
    if "summary" not in _REFERENCE:
        _REFERENCE["summary"] = runs.train("reference", BASE)
    return _REFERENCE["summary"]
