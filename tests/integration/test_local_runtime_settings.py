"""The settings a local runtime gives its Ray processes (`ray_runtime.LOCAL_DEFAULTS`): they
reach the workers that run stages and Ray Train, a value the caller set wins, and the caller's
environment comes back at shutdown."""

from __future__ import annotations

import os

import pytest

from lmforge.pipeline import ray_runtime
from lmforge.pipeline.ray_runtime import LOCAL_DEFAULTS, ensure_ray, shutdown_ray

WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


def test_a_value_the_caller_set_wins_and_every_value_comes_back(monkeypatch):
    monkeypatch.setenv(WATCHER, "1")
    ray_runtime._use_local_defaults()
    assert os.environ[WATCHER] == "1"
    ray_runtime._restore_local_env()
    assert os.environ[WATCHER] == "1"
    monkeypatch.delenv(WATCHER)
    ray_runtime._use_local_defaults()
    assert os.environ[WATCHER] == "0"
    ray_runtime._restore_local_env()
    assert WATCHER not in os.environ


@pytest.mark.integration
def test_the_workers_of_a_local_runtime_get_the_settings(tmp_path, monkeypatch):
    import ray

    monkeypatch.delenv(WATCHER, raising=False)
    ensure_ray(None, num_cpus=1, workdir=tmp_path)
    try:
        seen = ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in LOCAL_DEFAULTS}).remote())
        assert seen == LOCAL_DEFAULTS
        assert seen[WATCHER] == "0"  # Ray Train starts no preemption watcher
    finally:
        shutdown_ray()
    assert WATCHER not in os.environ
