"""Logging the trained model into its stage run leaves the worker process as it found it."""

from __future__ import annotations

import os

from lmforge.pipeline.stages.mlflow_model import log_text_generator
from lmforge.pipeline.tracking import client


def test_logging_the_model_does_not_leak_the_tracking_uri_into_the_worker(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = mlflow.create_experiment("leak", artifact_location=str(tmp_path / "artifacts"))
    run_id = mlflow.create_run(experiment).info.run_id
    for name in ("pretrain", "tokenizer"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "weights.txt").write_text(name)

    model_uri = log_text_generator(uri, run_id, tmp_path / "pretrain", tmp_path / "tokenizer")

    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert mlflow.get_logged_model(model_uri.split("/")[-1]).source_run_id == run_id
    assert mlflow.get_run(run_id).info.status == "RUNNING"  # the engine sets the final status
