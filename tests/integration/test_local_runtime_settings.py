"""The settings a local runtime gives its Ray processes (`ray_runtime.LOCAL_DEFAULTS`): they
reach the workers that run stages and Ray Train, and the caller's environment comes back at
shutdown (a value the caller set wins: tests/unit/engine/test_local_runtime_env.py). Without
`cluster.local_dashboard` the runtime starts no dashboard, and Ray Train no placement-group
cleaner to poll it."""

from __future__ import annotations

import os

import pytest

from lmforge.pipeline.cluster.ray_runtime import (
    LOCAL_DEFAULTS,
    WITHOUT_DASHBOARD_DEFAULTS,
    ensure_ray,
    shutdown_ray,
)
from lmforge.pipeline.training.trainer import PG_CLEANER_ENV

WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


@pytest.mark.integration
def test_the_workers_of_a_local_runtime_get_the_settings(tmp_path, monkeypatch):
    import ray

    monkeypatch.delenv(WATCHER, raising=False)
    monkeypatch.delenv(PG_CLEANER_ENV, raising=False)
    ensure_ray(None, num_cpus=1, workdir=tmp_path)
    try:
        expected = LOCAL_DEFAULTS | WITHOUT_DASHBOARD_DEFAULTS
        seen = ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in expected}).remote())
        assert seen == expected
        assert seen[PG_CLEANER_ENV] == "0"  # Ray Train starts no placement-group cleaner
        assert not ray._private.worker.global_worker.node.address_info.get("webui_url")
        assert seen[WATCHER] == "0"  # Ray Train starts no preemption watcher
        # nor does the dashboard report usage to usage-stats.ray.io
        from ray._common.usage.usage_lib import usage_stats_enabled

        assert ray.get(ray.remote(usage_stats_enabled).remote()) is False
    finally:
        shutdown_ray()
    assert WATCHER not in os.environ
    assert PG_CLEANER_ENV not in os.environ
