"""Params that look like secrets are redacted before they reach MLflow."""

from lmforge.pipeline.engine.tracking import redact


def test_secret_looking_keys_are_redacted_and_others_flattened():
    flat = redact(
        {
            "cluster": {
                "mlflow_password": "hunter2",
                "api_token": "t",
                "aws_secret": "s",
                "access_key": "k",
                "host": "h",
            },
            "train": {"lr": 0.1},
            "key": "cachekey",
        }
    )
    assert flat["cluster.mlflow_password"] == "***"
    assert flat["cluster.api_token"] == "***"
    assert flat["cluster.aws_secret"] == "***"
    assert flat["cluster.access_key"] == "***"
    assert flat["cluster.host"] == "h"
    assert flat["train.lr"] == 0.1
    assert flat["key"] == "cachekey"
