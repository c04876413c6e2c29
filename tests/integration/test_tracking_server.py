"""Against a real `mlflow server` on 127.0.0.1: lineage lands there; an unreachable server is one
clear error. (A run left RUNNING by a killed driver: tests/integration/test_tiny_pipeline.py.)

The run calls the CLI in this process (`main(argv)`); the unreachable server is met by an
`lmforge` process of its own, as a user meets it."""

from __future__ import annotations

import socket

import pytest
from cli_runner import in_process_ray, lmforge, lmforge_here, small_corpus, status

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_stage_runs_are_tracked_in_a_real_mlflow_server(mlflow_server, workdir, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    with in_process_ray():
        lmforge_here(
            "run", "--until", "train_tokenizer", *small_corpus(workdir.parent), f"workdir={workdir}"
        )
    states = status(workdir)
    mlflow = client(mlflow_server)
    for name in ("clean", "train_tokenizer"):
        run = mlflow.get_run(states[name]["mlflow_run_id"])
        assert run.info.status == "FINISHED"
        assert run.data.tags["lmforge.stage"] == name
        assert run.data.tags["mlflow.parentRunId"]
    assert not (workdir / "mlflow.db").exists()


def test_an_unreachable_tracking_server_is_one_clear_error(workdir):
    proc = lmforge(
        "run",
        "--until",
        "clean",
        f"workdir={workdir}",
        check=False,
        env={"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{_free_port()}"},
    )
    assert proc.returncode != 0
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("lmforge: error: cannot reach the MLflow tracking server")
