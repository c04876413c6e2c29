"""The cluster's tracking server as `infra/mlflow/` sets it up: PostgreSQL backend store, a
served artifact store, authentication on, all on 127.0.0.1. The pipeline tracks into it with
credentials from the environment only; `MlflowClient` reads the whole lineage back; secrets in
the config never reach it; missing or wrong credentials are one clear line.

Needs the OS package `postgresql` (infra/ci/install_test_deps.sh) and the Python packages
`psycopg[binary]` and `Flask-WTF` (MLflow's auth app).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import in_process_ray, lmforge, lmforge_here, small_corpus, status
from os_packages import ensure_os_packages

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCAL_POSTGRES = REPO / "infra" / "mlflow" / "local_postgres.sh"
START_SERVER = REPO / "infra" / "mlflow" / "start_server.sh"
SECRET = "s3cr3t-" + secrets.token_hex(8)


@dataclass
class Postgres:
    port: int
    password: str
    psql: str


@dataclass
class Server:
    url: str
    username: str
    password: str
    artifacts: Path

    def credentials(self) -> dict[str, str]:
        return {
            "MLFLOW_TRACKING_USERNAME": self.username,
            "MLFLOW_TRACKING_PASSWORD": self.password,
        }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _require_dependencies() -> str:
    """The psql binary; fails (never skips) naming what to install."""
    ensure_os_packages()
    binaries = glob.glob("/usr/lib/postgresql/*/bin/initdb") or [shutil.which("initdb")]
    if not binaries or not binaries[0]:
        pytest.fail("PostgreSQL is not installed: run infra/ci/install_test_deps.sh")
    missing = [m for m in ("psycopg", "flask_wtf") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"Python packages missing for the tracking server: {missing}; install the "
            "dev extras (psycopg[binary], Flask-WTF)"
        )
    return str(Path(binaries[0]).parent / "psql")


@pytest.fixture(scope="module")
def postgres():
    psql = _require_dependencies()
    home = Path(tempfile.mkdtemp(prefix="lmfpg-", dir="/tmp"))  # the postgres user must enter it
    pg = Postgres(port=_free_port(), password=secrets.token_urlsafe(18), psql=psql)
    env = {**os.environ, "PGPASSWORD": pg.password}
    try:
        subprocess.run(
            ["bash", str(LOCAL_POSTGRES), "up", str(home), str(pg.port)],
            env=env,
            check=True,
            timeout=180,
        )
        yield pg
    finally:
        subprocess.run(["bash", str(LOCAL_POSTGRES), "down", str(home)], timeout=120, check=False)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def server(postgres, tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    srv = Server(
        url=f"http://127.0.0.1:{port}",
        username="admin",
        password=secrets.token_urlsafe(18),
        artifacts=root / "artifacts",
    )
    env = {
        **os.environ,
        "MLFLOW_BACKEND_STORE_URI": f"postgresql://mlflow@127.0.0.1:{postgres.port}/mlflow",
        "PGPASSWORD": postgres.password,
        "MLFLOW_ARTIFACTS_DESTINATION": str(srv.artifacts),
        "MLFLOW_AUTH_ADMIN_USERNAME": srv.username,
        "MLFLOW_AUTH_ADMIN_PASSWORD": srv.password,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
        "MLFLOW_AUTH_DIR": str(root / "auth"),
        "PORT": str(port),
        "WORKERS": "1",
        "PYTHON": sys.executable,
    }
    log = (root / "server.log").open("w")
    proc = subprocess.Popen(
        ["bash", str(START_SERVER)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 150
        while True:
            try:
                urllib.request.urlopen(srv.url + "/health", timeout=2)
                break
            except OSError:
                tail = (root / "server.log").read_text()[-2000:]
                assert proc.poll() is None, f"the MLflow server exited:\n{tail}"
                assert time.time() < deadline, f"the MLflow server did not answer:\n{tail}"
                time.sleep(1)
        yield srv
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


def test_pipeline_lineage_lands_in_postgres_through_the_authenticated_server(
    server, postgres, workdir, monkeypatch
):
    # The server and its credentials from the environment only (this process's: the CLI runs
    # here, and the local Ray runtime it starts passes them on to its workers).
    for name, value in {"MLFLOW_TRACKING_URI": server.url, **server.credentials()}.items():
        monkeypatch.setenv(name, value)
    corpus = small_corpus(workdir.parent)
    with in_process_ray():
        lmforge_here(
            "run", "--until", "tokenize", *corpus, f"workdir={workdir}",
            f"+cluster.api_token={SECRET}",
        )  # fmt: skip
    states = status(workdir)
    assert {s: e["state"] for s, e in states.items()} == dict.fromkeys(
        ("clean", "train_tokenizer", "tokenize"), "ran"
    )
    assert not (workdir / "mlflow.db").exists()

    mlflow = client(server.url)
    runs = {stage: mlflow.get_run(entry["mlflow_run_id"]) for stage, entry in states.items()}
    parent = mlflow.get_run(runs["clean"].data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["cluster.api_token"] == "***"
    nested = mlflow.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
    )
    assert sorted(r.info.run_name for r in nested) == sorted(states)
    for stage, run in runs.items():
        assert run.info.status == "FINISHED"
        assert run.data.tags["lmforge.stage"] == stage
        assert run.data.tags["lmforge.cache_key"] == states[stage]["key"]
        assert "manifest.json" in {a.path for a in mlflow.list_artifacts(run.info.run_id)}
        on_disk = server.artifacts / run.info.experiment_id / run.info.run_id / "artifacts"
        assert (on_disk / "manifest.json").is_file()  # served artifact store, not the workdir
    tokenize = runs["tokenize"].data.tags
    assert f"clean={runs['clean'].info.run_id}" in tokenize["lmforge.input_runs"]
    assert (
        f"train_tokenizer={runs['train_tokenizer'].info.run_id}" in tokenize["lmforge.input_runs"]
    )
    for run in [parent, *runs.values()]:
        assert SECRET not in str(run.data.params) + str(run.data.tags)

    ids = ",".join(f"'{r.info.run_id}'" for r in [parent, *runs.values()])
    rows = subprocess.run(
        [
            postgres.psql,
            "-h",
            "127.0.0.1",
            "-p",
            str(postgres.port),
            "-U",
            "mlflow",
            "-d",
            "mlflow",
            "-tAc",
            f"select count(*) from runs where run_uuid in ({ids})",
        ],
        env={**os.environ, "PGPASSWORD": postgres.password},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert rows == "4"  # the backend store really is PostgreSQL


@pytest.mark.parametrize("credentials", ["missing", "wrong"])
def test_missing_or_wrong_credentials_are_one_clear_line(server, workdir, monkeypatch, credentials):
    """Missing credentials as a user's `lmforge` process meets them; wrong ones through the CLI
    in this process (`main(argv)`)."""
    env = {"MLFLOW_TRACKING_URI": server.url}
    if credentials == "wrong":
        env.update(MLFLOW_TRACKING_USERNAME=server.username, MLFLOW_TRACKING_PASSWORD="x" * 16)
    else:
        env.update(MLFLOW_TRACKING_USERNAME="", MLFLOW_TRACKING_PASSWORD="")
    args = ("run", "--until", "clean", f"workdir={workdir}")
    if credentials == "wrong":
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with in_process_ray():  # started beside MLflow's setup, which fails
            proc = lmforge_here(*args, check=False)
    else:
        proc = lmforge(*args, env=env, check=False, timeout=300)
    assert proc.returncode == 1
    errors = [line for line in proc.stdout.splitlines() if line.startswith("lmforge: error:")]
    assert len(errors) == 1, proc.stdout
    assert server.url in errors[0]
    assert "MLFLOW_TRACKING_USERNAME" in errors[0]  # says what to set
    assert not (workdir / "store" / "clean").exists()
