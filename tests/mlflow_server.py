"""A real `mlflow server` on 127.0.0.1 for the tests that track to one (a sqlite store)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def running_mlflow_server(tmp_path: Path) -> Iterator[str]:
    """A real `mlflow server` on 127.0.0.1, its sqlite store and artifacts in `tmp_path`: its
    URL; stopped on leaving."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'server.db'}",
            "--default-artifact-root",
            (tmp_path / "server-artifacts").as_uri(),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # as infra/mlflow/start_server.sh runs a cluster's: without MLflow's job execution, whose
        # consumers poll all the time for features lmforge does not use
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, proc, "mlflow server", timeout_s=90)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_until_healthy(url: str, proc: subprocess.Popen, name: str, timeout_s: float) -> None:
    """Return once `url`/health answers; fail naming `name` if `proc` exits or `timeout_s`
    passes first."""
    deadline = time.time() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError:
            assert proc.poll() is None, f"{name} exited"
            assert time.time() < deadline, f"{name} did not answer within {timeout_s:.0f} s"
            time.sleep(1)
