"""Against a real `mlflow server` on 127.0.0.1: lineage lands there; an unreachable server or a
run left RUNNING by a killed driver are handled."""

from __future__ import annotations

import socket

import pytest
from cli_runner import lmforge, small_corpus, status

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_stage_runs_are_tracked_in_a_real_mlflow_server(mlflow_server, workdir):
    lmforge(
        "run",
        "--until",
        "train_tokenizer",
        *small_corpus(workdir.parent),
        f"workdir={workdir}",
        env={"MLFLOW_TRACKING_URI": mlflow_server},
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


def test_runs_left_running_by_a_killed_driver_become_killed_on_the_next_invocation(workdir):
    corpus = small_corpus(workdir.parent)
    lmforge("run", "--until", "clean", *corpus, f"workdir={workdir}")
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name("lmforge").experiment_id
    orphan = mlflow.create_run(experiment, run_name="clean").info.run_id  # as a SIGKILL leaves it
    lmforge("run", "--until", "clean", *corpus, f"workdir={workdir}")
    assert mlflow.get_run(orphan).info.status == "KILLED"
