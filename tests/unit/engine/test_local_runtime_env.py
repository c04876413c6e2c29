"""A local runtime's settings (`ray_runtime.LOCAL_DEFAULTS`) give way to the caller's, and the
caller's environment comes back when the runtime ends."""

from __future__ import annotations

import os

import pytest

from lmforge.pipeline.cluster import ray_runtime
from lmforge.pipeline.errors import ConfigError

WATCHER = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"


def test_a_value_the_caller_set_wins_and_every_value_comes_back(monkeypatch):
    # A saved environment of its own: a local runtime another test keeps up holds the real one.
    monkeypatch.setattr(ray_runtime, "_saved_env", {})
    monkeypatch.setenv(WATCHER, "1")
    ray_runtime._use_local_defaults(ray_runtime.LOCAL_DEFAULTS)
    assert os.environ[WATCHER] == "1"
    ray_runtime._restore_env()
    assert os.environ[WATCHER] == "1"
    monkeypatch.delenv(WATCHER)
    ray_runtime._use_local_defaults(ray_runtime.LOCAL_DEFAULTS)
    assert os.environ[WATCHER] == "0"
    ray_runtime._restore_env()
    assert WATCHER not in os.environ


def test_the_dashboard_setting_is_a_boolean_and_off_by_default():
    assert ray_runtime.local_dashboard({}) is False
    assert ray_runtime.local_dashboard({"local_dashboard": None}) is False
    assert ray_runtime.local_dashboard({"local_dashboard": True}) is True
    with pytest.raises(ConfigError, match="cluster.local_dashboard must be true or false"):
        ray_runtime.local_dashboard({"local_dashboard": "maybe"})
