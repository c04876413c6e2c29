"""Fault injection for fault-tolerance tests and drills: one worker SIGKILLs itself, once.

The fault fires on worker `kill_rank` right after optimizer step `kill_at_step`, and only if
`once_file` does not exist yet; the worker creates that file just before killing itself, so
the attempt Ray Train restarts from the last checkpoint runs through.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(kw_only=True, slots=True, frozen=True)
class FaultInjection:
    """Kill one training worker process with SIGKILL at a given step, the first time only."""

    kill_rank: int
    """World rank of the worker that dies."""
    kill_at_step: int
    """It dies right after finishing this optimizer step."""
    once_file: str
    """Created before the kill; while it exists the fault is disarmed."""

    def maybe_fire(self, rank: int, step: int) -> None:
        """SIGKILL this process if the fault is armed for (rank, step)."""
        if rank != self.kill_rank or step != self.kill_at_step:
            return
        marker = Path(self.once_file)
        if marker.exists():
            return
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"pid {os.getpid()} killed at step {step}\n")
        os.kill(os.getpid(), signal.SIGKILL)
