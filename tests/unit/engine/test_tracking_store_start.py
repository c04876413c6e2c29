"""Two runs starting together on a fresh workdir: one creates and migrates the sqlite store under
a lock beside it while the other waits, and both end up in one experiment, whoever created it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lmforge.pipeline.engine.tracking import _create_experiment, client, ensure_experiment

START = """
import sys
from lmforge.pipeline.engine.tracking import client, ensure_experiment, store_creation_lock
uri, location = sys.argv[1], sys.argv[2]
with store_creation_lock(uri):
    mlflow = client(uri)
    experiment = ensure_experiment(mlflow, "lmforge", location)
print(mlflow.create_run(experiment).info.experiment_id)
"""


@pytest.mark.slow  # two Python processes importing MLflow
def test_two_runs_on_a_fresh_workdir_both_start_in_one_experiment(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    location = (tmp_path / "mlartifacts").as_uri()
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", START, uri, location],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [proc.communicate(timeout=300) for proc in starts]
    assert [proc.returncode for proc in starts] == [0, 0], [err[-2000:] for _, err in results]
    assert len({out.strip().splitlines()[-1] for out, _ in results}) == 1
    assert (tmp_path / ".mlflow.db.lock").is_file()


def test_an_experiment_another_run_created_meanwhile_is_taken(tmp_path):
    mlflow = client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    location = (tmp_path / "mlartifacts").as_uri()
    theirs = ensure_experiment(mlflow, "lmforge", location)
    assert _create_experiment(mlflow, "lmforge", location) == theirs
