"""Fault injection for fault-tolerance tests and drills: one worker SIGKILLs itself, once.

The fault fires on worker `kill_rank` at optimizer step `kill_at_step`, and only if `once_file`
does not exist yet; the worker creates that file just before killing itself, so the attempt Ray
Train restarts from the last checkpoint runs through. By default the worker dies right after the
step, once the checkpoint it may be saving in the background is published (so the drill is the
same however fast saves are); with `during_save` it dies while writing its shard of the
checkpoint of that step.
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
    """It dies right after finishing this optimizer step (or while saving it: `during_save`)."""
    once_file: str
    """Created before the kill; while it exists the fault is disarmed."""
    during_save: bool = False
    """Die halfway through writing this rank's shard of the checkpoint of `kill_at_step`."""

    def armed(self, rank: int, step: int) -> bool:
        """True if the fault is due on this rank at this step and has not fired yet."""
        return rank == self.kill_rank and step == self.kill_at_step and not self.fired

    @property
    def fired(self) -> bool:
        return Path(self.once_file).exists()

    def maybe_fire(self, rank: int, step: int) -> None:
        """SIGKILL this process if the fault is armed for (rank, step)."""
        if not self.armed(rank, step):
            return
        marker = Path(self.once_file)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"pid {os.getpid()} killed at step {step}\n")
        os.kill(os.getpid(), signal.SIGKILL)
