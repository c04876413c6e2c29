"""`lmforge submit` never puts a secret where anyone who can list jobs reads it (the entrypoint
and the metadata); secrets travel in the job's environment, and the job's driver gets them back."""

from __future__ import annotations

import json
import shlex

import pytest

from lmforge.pipeline.cli.main import _parser
from lmforge.pipeline.cluster import job_payload
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.errors import LmforgeError

PASSWORD = "s3cret-Pa55"
TOKEN = "ghp_" + "Ab3" * 12


def _payload(*argv: str) -> job_payload.JobPayload:
    args = _parser().parse_args(["submit", *(a for a in argv if "=" not in a)])
    args.overrides = [a for a in argv if "=" in a]
    return job_payload.job_payload(args, compose(args.overrides))


def _visible(job: job_payload.JobPayload) -> str:
    return job.entrypoint + json.dumps(job.metadata)


def test_secret_overrides_travel_in_the_environment_not_the_command_line(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = f"http://alice:{PASSWORD}@127.0.0.1:5000"
    job = _payload(
        "--until",
        "clean",
        "workdir=/shared/runs",
        f"cluster.tracking_uri={uri}",
        f"+cluster.api_token={TOKEN}",
        "train.lr=0.01",
    )
    assert PASSWORD not in _visible(job) and TOKEN not in _visible(job)
    assert "alice" not in _visible(job)
    assert set(job.env_vars.values()) >= {uri, TOKEN}
    command = shlex.split(job.entrypoint)
    assert "train.lr=0.01" in command and "workdir=/shared/runs" in command

    # The job's driver, given that environment, composes the very config the user asked for.
    for name, value in job.env_vars.items():
        monkeypatch.setenv(name, value)
    config = compose([a for a in command[3:] if "=" in a])
    assert config["cluster"]["tracking_uri"] == uri
    assert config["cluster"]["api_token"] == TOKEN
    assert config["train"]["lr"] == 0.01


def test_a_tracking_uri_with_credentials_in_the_environment_is_forwarded_by_environment(
    monkeypatch,
):
    uri = f"https://bob:{PASSWORD}@mlflow.example:443"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    job = _payload("workdir=/shared/runs")
    assert PASSWORD not in _visible(job)
    assert job.env_vars["MLFLOW_TRACKING_URI"] == uri


def test_overrides_without_secrets_stay_on_the_command_line():
    job = _payload("workdir=/shared/runs", "data.paths=[a.txt,b.jsonl]", "train.lr=0.01")
    assert not [k for k in job.env_vars if k.startswith(job_payload.SECRET_ENV_PREFIX)]
    assert "data.paths=[a.txt,b.jsonl]" in shlex.split(job.entrypoint)


def test_a_secret_inside_a_list_override_is_refused_naming_the_key():
    args = _parser().parse_args(["submit"])
    args.overrides = ["workdir=/shared/runs", f"data.paths=[a.txt,https://u:{PASSWORD}@h/b]"]
    with pytest.raises(LmforgeError, match="data.paths") as raised:
        job_payload.job_payload(args, {"workdir": "/shared/runs"})
    assert PASSWORD not in str(raised.value)
