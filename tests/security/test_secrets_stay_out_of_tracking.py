"""Config values whose names look like secrets (`*token*`, `*password*`, `*secret*`, `*key*` as
a word of the name) are logged to MLflow as `***`; every other value is logged as it is, so the
params stay useful. End to end: a secret given on the command line appears nowhere in the
workdir (MLflow store, artifacts, run records, manifests).
"""

from __future__ import annotations

import secrets
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from cli_runner import in_process_ray, lmforge, lmforge_here, small_corpus, status

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.tracking import client, redact

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
    corpus = small_corpus(workdir.parent)
    with in_process_ray():  # the CLI in this process: the workdir is what is looked at
        lmforge_here(
            "run", "--until", "clean", *corpus, f"workdir={workdir}", f"+cluster.api_token={secret}"
        )
    leaks = [
        str(path)
        for path in workdir.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]
    assert leaks == []
    db = (workdir / "mlflow.db").read_bytes()
    assert b"cluster.api_token" in db  # the param was logged, with its value redacted


@pytest.mark.integration
def test_credentials_in_the_tracking_uri_reach_no_param_record_or_log(mlflow_server, tmp_path):
    """`cluster.tracking_uri=http://user:PASSWORD@...`: MLflow gets `user:***@` as the param; the
    password is in no file of the server's store, the workdir or Ray's logs, nor in the output."""
    password = "s3cret" + secrets.token_hex(6)
    uri = mlflow_server.replace("http://", f"http://alice:{password}@")
    workdir = tmp_path / "runs"
    ray_tmp = Path(tempfile.mkdtemp(prefix="lmf-ray-"))  # short: Ray's socket paths must fit
    try:
        proc = lmforge(
            "run",
            "--until",
            "clean",
            *small_corpus(tmp_path),
            f"workdir={workdir}",
            f"cluster.tracking_uri={uri}",
            env={"RAY_TMPDIR": str(ray_tmp)},
        )
        files = [p for root in (tmp_path, ray_tmp) for p in root.rglob("*") if p.is_file()]
        leaks = [str(p) for p in files if password.encode() in p.read_bytes()]
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert password not in proc.stdout
    assert leaks == []
    mlflow = client(mlflow_server)
    stage_run = mlflow.get_run(status(workdir)["clean"]["mlflow_run_id"])
    parent = mlflow.get_run(stage_run.data.tags["mlflow.parentRunId"])
    masked = mlflow_server.replace("http://", "http://alice:***@")
    assert parent.data.params["cluster.tracking_uri"] == masked
    assert stat.S_IMODE((workdir / ".ray_token").stat().st_mode) == 0o600
