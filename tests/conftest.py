"""Shared fixtures: a fresh workdir per test and quiet, loopback-only services."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)


@pytest.fixture
def workdir(tmp_path):
    path = tmp_path / "runs"
    path.mkdir()
    return path
