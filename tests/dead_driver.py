"""A driver that has died: the owner record of a process of this host that has exited, and a
pipeline left RUNNING in MLflow by it, as a SIGKILLed `lmforge run` leaves its runs."""

from __future__ import annotations

import subprocess
import sys

from lmforge.pipeline.engine.driver import HEARTBEAT_TAG, driver_tags, this_driver
from lmforge.pipeline.storage.temporaries import process_start_ticks


def dead_driver() -> dict:
    """The owner record (host, boot, pid, start time) of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    driver = {**this_driver(), "pid": proc.pid, "start_ticks": process_start_ticks(proc.pid)}
    proc.kill()
    proc.wait()
    return driver


def orphan_pipeline(mlflow, experiment_id: str, driver: dict, name: str = "orphan") -> list[str]:
    """A parent run naming `driver` and one stage run under it, both RUNNING: their ids."""
    tags = {"lmforge.pipeline_run": name, HEARTBEAT_TAG: "3", **driver_tags(driver)}
    parent = mlflow.create_run(experiment_id, run_name=f"pipeline-{name}", tags=tags).info.run_id
    child_tags = {"lmforge.pipeline_run": name, "mlflow.parentRunId": parent}
    child = mlflow.create_run(experiment_id, run_name="clean", tags=child_tags).info.run_id
    return [parent, child]
