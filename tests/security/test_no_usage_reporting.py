"""An lmforge process sends no usage data to its libraries' vendors: MLflow's telemetry (which
first looks up config.mlflow-telemetry.io, from every process that imports mlflow) is off unless
the user turns it on, and a local Ray runtime's dashboard reports nothing to usage-stats.ray.io
(`ray_runtime.LOCAL_DEFAULTS`, checked in the workers by
tests/integration/test_local_runtime_settings.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Records every host name the process looks up, then tracks a run as a stage does, and waits for
# MLflow's telemetry threads (its config fetch starts at `import mlflow`).
PROBE = """
import json, socket, sys, time
looked_up = []
real = socket.getaddrinfo
def recording(host, *args, **kwargs):
    looked_up.append(str(host))
    return real(host, *args, **kwargs)
socket.getaddrinfo = recording
from lmforge.pipeline.engine.tracking import client
mlflow = client(sys.argv[1])
experiment = mlflow.create_experiment("probe")
run = mlflow.create_run(experiment)
mlflow.log_metric(run.info.run_id, "loss", 1.0)
mlflow.set_terminated(run.info.run_id)
time.sleep(2.0)
print(json.dumps(looked_up))
"""


def _hosts_looked_up(tmp_path, **env: str) -> list[str]:
    # A user's shell: MLflow turns its telemetry off by itself under pytest and CI
    # (PYTEST_CURRENT_TEST, CI, GITHUB_ACTIONS, ...), which a user's run is not.
    user_shell = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, f"sqlite:///{tmp_path / 'mlflow.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**user_shell, **env},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tracking_a_run_looks_up_no_host(tmp_path):
    assert _hosts_looked_up(tmp_path) == []


def test_the_users_choice_turns_mlflows_telemetry_back_on(tmp_path):
    # the probe sees what telemetry does when on, so the test above can see it too
    hosts = _hosts_looked_up(tmp_path, MLFLOW_DISABLE_TELEMETRY="false")
    assert any("mlflow-telemetry" in host for host in hosts), hosts
