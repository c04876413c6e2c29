"""The settings a local runtime gives its Ray processes (`ray_runtime.LOCAL_DEFAULTS`): they
reach the workers that run stages and Ray Train, and the caller's environment comes back at
shutdown (a value the caller set wins: tests/unit/engine/test_local_runtime_env.py)."""

from __future__ import annotations

import os

import pytest

from lmforge.pipeline.ray_runtime import LOCAL_DEFAULTS, ensure_ray, shutdown_ray

WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


@pytest.mark.integration
def test_the_workers_of_a_local_runtime_get_the_settings(tmp_path, monkeypatch):
    import ray

    monkeypatch.delenv(WATCHER, raising=False)
    ensure_ray(None, num_cpus=1, workdir=tmp_path)
    try:
        seen = ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in LOCAL_DEFAULTS}).remote())
        assert seen == LOCAL_DEFAULTS
        assert seen[WATCHER] == "0"  # Ray Train starts no preemption watcher
        # nor does the dashboard report usage to usage-stats.ray.io
        from ray._common.usage.usage_lib import usage_stats_enabled

        assert ray.get(ray.remote(usage_stats_enabled).remote()) is False
    finally:
        shutdown_ray()
    assert WATCHER not in os.environ
