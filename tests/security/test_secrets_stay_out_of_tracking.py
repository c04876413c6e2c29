"""Config values whose names look like secrets (`*token*`, `*password*`, `*secret*`, `*key*` as
a word of the name) are logged to MLflow as `***`; every other value is logged as it is, so the
params stay useful. End to end: a secret given on the command line appears nowhere in the
workdir (MLflow store, artifacts, run records, manifests).
"""

from __future__ import annotations

import secrets

import pytest
from cli_runner import lmforge

from lmforge.pipeline.config import compose
from lmforge.pipeline.tracking import redact

SECRET_NAMES = (
    "api_token",
    "auth_token",
    "mlflow_password",
    "aws_secret_access_key",
    "client_secret",
    "access_key",
    "accessKey",
    "private_key",
    "apikey",
)


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_looking_config_values_are_redacted(name):
    assert redact({"cluster": {name: "hunter2"}}) == {f"cluster.{name}": "***"}


def test_no_setting_of_the_shipped_config_is_hidden_from_mlflow():
    """None of them is a secret: `max_tokens`, `special_tokens`, `cache_key` keep their values."""
    flat = redact(compose(["preset=tiny"]))
    hidden = sorted(k for k, v in flat.items() if v == "***")
    assert hidden == []


@pytest.mark.integration
def test_a_secret_in_the_config_lands_nowhere_in_the_workdir(workdir):
    secret = "s3cr3t-" + secrets.token_hex(12)
    lmforge("run", "--until", "clean", f"workdir={workdir}", f"+cluster.api_token={secret}")
    leaks = [
        str(path)
        for path in workdir.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]
    assert leaks == []
    db = (workdir / "mlflow.db").read_bytes()
    assert b"cluster.api_token" in db  # the param was logged, with its value redacted
