"""Fault injection for drills and tests: a stage's process SIGKILLs itself right after its commit.

With `LMFORGE_FAULT_KILL_AFTER_COMMIT=STAGE` in the driver's environment, the process running
STAGE dies between committing the artifact and closing its MLflow run: the moment where a worker
lost on a real cluster leaves a committed artifact beside a run that was never closed. The runner
passes the variable on to the stage's task, whether or not Ray was started with it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

KILL_AFTER_COMMIT = "LMFORGE_FAULT_KILL_AFTER_COMMIT"


def task_environment() -> dict[str, Any]:
    """Ray task options that carry the fault to the stage's process; {} when none is set."""
    stage = os.environ.get(KILL_AFTER_COMMIT)
    return {"runtime_env": {"env_vars": {KILL_AFTER_COMMIT: stage}}} if stage else {}


def maybe_kill_after_commit(stage: str) -> None:
    """SIGKILL this process if the fault names `stage`."""
    if os.environ.get(KILL_AFTER_COMMIT) == stage:
        os.kill(os.getpid(), signal.SIGKILL)
