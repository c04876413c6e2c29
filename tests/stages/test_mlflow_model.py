"""The trained model logged into its stage run: code and safetensors, no pickle; it loads back
from the run and continues prompts as the model itself does; logging it leaves the worker
process as it found it."""

from __future__ import annotations

import os
from pathlib import Path

import mlflow
from logged_model import PROMPTS, log_tiny_model

from lmforge.model.generate import SamplingConfig
from lmforge.pipeline.engine.tracking import client
from lmforge.pipeline.evaluation.trained_model import TrainedModel

PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".bin", ".joblib", ".cloudpickle")


def test_logging_the_model_does_not_leak_the_tracking_uri_into_the_worker(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri, run_id, model_uri, _, _ = log_tiny_model(tmp_path)

    assert "MLFLOW_TRACKING_URI" not in os.environ
    tracking = client(uri)
    assert tracking.get_logged_model(model_uri.split("/")[-1]).source_run_id == run_id
    assert tracking.get_run(run_id).info.status == "RUNNING"  # the engine sets the final status


def test_logging_the_model_prints_no_advice_meant_for_other_models(tmp_path, recwarn, capfd):
    log_tiny_model(tmp_path)
    advice = [str(w.message) for w in recwarn if issubclass(w.category, UserWarning)]
    assert advice == []
    assert "Downloading artifacts" not in capfd.readouterr().err


def test_the_logged_model_is_code_and_safetensors_without_a_pickle(tmp_path, monkeypatch):
    uri, _, model_uri, _, _ = log_tiny_model(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    local = mlflow.artifacts.download_artifacts(model_uri, dst_path=str(tmp_path / "download"))
    files = {p.relative_to(local).as_posix() for p in Path(local).rglob("*")}

    assert not [f for f in files if f.endswith(PICKLE_SUFFIXES)], sorted(files)
    assert "text_generator.py" in files
    assert "artifacts/pretrain/model/model.safetensors" in files
    flavor = mlflow.models.Model.load(local).flavors["python_function"]
    assert "python_model" not in flavor  # where a cloudpickled model object would be
    assert flavor["model_code_path"].endswith("text_generator.py")


def test_the_logged_model_loads_back_and_continues_as_the_model_does(tmp_path, monkeypatch):
    uri, _, model_uri, pretrain, tokenizer = log_tiny_model(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    served = mlflow.pyfunc.load_model(model_uri).predict(PROMPTS, params={"max_new_tokens": 6})

    direct = TrainedModel(pretrain, tokenizer).complete(
        PROMPTS, SamplingConfig(max_new_tokens=6, greedy=True)
    )
    assert served == direct and all(served)
