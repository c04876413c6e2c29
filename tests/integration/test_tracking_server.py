"""Against a real `mlflow server` on 127.0.0.1: lineage lands there; an unreachable server is one
clear error; two pipelines share it, and a run closes the runs of a dead driver and of no live
one; a stage whose process dies right after its commit ran, and no run says FAILED beside it.
(Runs left RUNNING by a killed driver in a workdir's own store: test_tiny_pipeline.py.)

The runs call the CLI in this process (`main(argv)`), on the Ray runtime it keeps for such
modules (`shares_ray`: its workers started without MLFLOW_TRACKING_URI); the other pipeline and the
unreachable server are met by `lmforge` processes of their own, as a user meets them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest
from cli_runner import LMFORGE, lmforge, lmforge_here, small_corpus, status
from mlflow_server import running_mlflow_server

from lmforge.pipeline.engine.commit_fault import KILL_AFTER_COMMIT
from lmforge.pipeline.engine.run_records import RecordBook
from lmforge.pipeline.engine.tracking import client

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """One real `mlflow server` for the module's tests (each reads only its own runs; a
    server's start is about 10 CPU-seconds), without MLflow's job execution (huey consumers
    that poll all the time, for GenAI features lmforge does not use), as
    infra/mlflow/start_server.sh runs a cluster's."""
    with running_mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


def _runs_of(mlflow, pipeline_run: str) -> dict[str, str]:
    """Status of every MLflow run of one pipeline run, by run name."""
    experiment = mlflow.get_experiment_by_name("lmforge").experiment_id
    found = mlflow.search_runs(
        [experiment], filter_string=f"tags.`lmforge.pipeline_run` = '{pipeline_run}'"
    )
    return {run.info.run_name: run.info.status for run in found}


def _parent_run_of(mlflow, pid: int, proc: subprocess.Popen) -> str:
    """The pipeline run id of the driver `pid`, once its parent run is on the server."""
    deadline = time.time() + 300
    while time.time() < deadline:
        assert proc.poll() is None, f"the other pipeline exited {proc.returncode}"
        experiment = mlflow.get_experiment_by_name("lmforge")
        if experiment is not None:
            found = mlflow.search_runs(
                [experiment.experiment_id],
                filter_string=f"tags.`lmforge.driver.pid` = '{pid}'",
            )
            if found:
                return found[0].data.tags["lmforge.pipeline_run"]
        time.sleep(0.5)
    raise AssertionError("the other pipeline created no parent run within 5 minutes")


def test_a_stage_whose_process_dies_right_after_its_commit_ran_and_feeds_the_next(
    workdir, monkeypatch
):
    # on the module's Ray runtime, whose workers may have started before this test
    monkeypatch.setenv(KILL_AFTER_COMMIT, "clean")
    lmforge_here(
        "run", "--until", "train_tokenizer", *small_corpus(workdir.parent), f"workdir={workdir}"
    )
    states = status(workdir)
    assert states["clean"]["state"] == "ran" and states["train_tokenizer"]["state"] == "ran"
    clean = RecordBook(workdir / "pipeline_runs").latest().stage("clean")
    assert "after committing the artifact" in clean.warning, "the process died after its commit"
    artifact = workdir / "store" / "train_tokenizer" / states["train_tokenizer"]["key"]
    inputs = json.loads((artifact / "manifest.json").read_text())["inputs"]
    assert inputs["clean"]["key"] == states["clean"]["key"]
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    run = mlflow.get_run(states["clean"]["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["lmforge.closed_after_commit"] == "RUNNING"
    pipeline = run.data.tags["lmforge.pipeline_run"]
    assert set(_runs_of(mlflow, pipeline).values()) == {"FINISHED"}


def test_a_run_closes_the_runs_of_a_dead_driver_and_never_a_live_ones(
    mlflow_server, tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
    mlflow = client(mlflow_server)
    corpus = small_corpus(tmp_path)
    theirs_dir = tmp_path / "theirs"
    other = subprocess.Popen(  # another pipeline on the same server, leading its own group
        [*LMFORGE, "run", "--until", "clean", *corpus, f"workdir={theirs_dir}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        theirs = _parent_run_of(mlflow, other.pid, other)
        while not (theirs_dir / "pipeline_runs" / f"{theirs}.json").exists():  # written next
            assert other.poll() is None, f"the other pipeline exited {other.returncode}"
            time.sleep(0.2)
        os.killpg(other.pid, signal.SIGSTOP)  # alive, frozen with its runs RUNNING
        lmforge_here("run", "--until", "clean", *corpus, f"workdir={tmp_path / 'ours'}")
        live = _runs_of(mlflow, theirs)
        assert live[f"pipeline-{theirs}"] == "RUNNING" and "KILLED" not in live.values(), live
        os.killpg(other.pid, signal.SIGKILL)
        other.wait(timeout=60)
        # the next run in the dead driver's workdir: its runs, its record, its Ray Train storage
        lmforge_here("run", "--until", "clean", *corpus, f"workdir={theirs_dir}")
        after = _runs_of(mlflow, theirs)
        assert after[f"pipeline-{theirs}"] == "KILLED"
        assert "RUNNING" not in after.values(), after
    finally:
        if other.poll() is None:
            os.killpg(other.pid, signal.SIGKILL)
            other.wait(timeout=60)
    assert RecordBook(theirs_dir / "pipeline_runs").load(theirs).state == "killed"
    assert not list((theirs_dir / "ray_storage").glob(f"{theirs}*"))
    assert status(theirs_dir)["clean"]["state"] in ("ran", "cached")


def test_stage_runs_are_tracked_in_a_real_mlflow_server(mlflow_server, workdir, monkeypatch):
    # on a runtime whose workers started without MLFLOW_TRACKING_URI: the driver's server
    # reaches the stages all the same
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)
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
