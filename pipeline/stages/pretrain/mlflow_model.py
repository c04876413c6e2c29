"""The trained model as an MLflow 3 logged model (pyfunc), so it loads back from its run with
`mlflow.pyfunc.load_model("models:/<id>")` and serves with `mlflow models serve`.

Logged from code (`text_generator.py`, copied into the model) with the pretrain artifact's
safetensors and the tokenizer as artifacts: the logged model holds no pickle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path

import mlflow.pyfunc

from lmforge.environ import environ_set

MODEL_CODE = Path(__file__).with_name("text_generator.py")
"""The model's code: MLflow runs this file on load, never unpickles a model object."""


def log_text_generator(
    tracking_uri: str,
    run_id: str,
    pretrain_dir: str | os.PathLike[str],
    tokenizer_dir: str | os.PathLike[str],
):
    """Log the model into the stage's run; returns the logged model's URI."""
    from mlflow import MlflowClient
    from mlflow.models import infer_signature

    defaults = {"max_new_tokens": 32, "greedy": True, "temperature": 1.0, "top_p": 1.0, "seed": 0}
    signature = infer_signature(["a prompt"], ["a continuation"], params=defaults)
    client = MlflowClient(tracking_uri)
    with _fluent_tracking_uri(tracking_uri):
        return _log_into(run_id, client, signature, pretrain_dir, tokenizer_dir)


@contextlib.contextmanager
def _fluent_tracking_uri(uri: str):
    """Point MLflow's fluent API at `uri` for a block, then restore the process as it was.

    `mlflow.set_tracking_uri` also exports MLFLOW_TRACKING_URI; left set, a reused Ray worker
    would send the next pipeline's stage runs to this pipeline's store.
    """
    previous = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(None)
        if previous is not None:
            os.environ["MLFLOW_TRACKING_URI"] = previous


@contextlib.contextmanager
def _quiet_mlflow():
    """Keep MLflow's advice for other use cases (type hints, input examples) and its download
    bars out of the pipeline's output."""
    logger = logging.getLogger("mlflow.pyfunc")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        # MLflow runs the model's code while logging, under its own "once" filter for user
        # warnings, so filters set here do not reach that advice: record and drop it instead.
        with (
            environ_set({"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}),
            warnings.catch_warnings(record=True) as caught,
        ):
            yield
        for w in caught:
            if not issubclass(w.category, UserWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    finally:
        logger.setLevel(level)


def _log_into(run_id, client, signature, pretrain_dir, tokenizer_dir) -> str:
    mlflow.start_run(run_id=run_id)
    try:
        with _quiet_mlflow():
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=str(MODEL_CODE),
                artifacts={"pretrain": str(pretrain_dir), "tokenizer": str(tokenizer_dir)},
                pip_requirements=["lmforge", "torch", "tokenizers", "safetensors"],
                signature=signature,
            )
    finally:
        mlflow.end_run()
        client.update_run(run_id, status="RUNNING")  # the engine sets the final status
    return info.model_uri
