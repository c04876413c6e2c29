"""Stopping a pretraining run early, when a sweep asks (`lmforge sweep --early-stop`).

A sweep that stops early watches each variant's pretrain key through one small file beside the
key's lease, `<store>/pretrain/.<key>.stop.json`: written when the variant starts (watched, no
verdict yet), then, for each `val_loss` the run logs, ASHA's verdict (`answered`: the last step
it let go on; `stop`: stop there). The training loop, each time it scores the validation slice of
a watched run, waits for the verdict on that step (at most `VERDICT_WAIT_S`, then it stops
waiting for good), so a hopeless run stops at the rung that judged it. A run told to stop saves a
checkpoint at that step, ends, and the stage raises `StoppedEarly` instead of committing: the
model of a stopped variant is not the model of its key. The sweep then commits it under a key of
its own, `train.stopped_at=N`, which resumes from that checkpoint (the same lineage) and trains
no further.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.location import is_bucket, local_path

VERDICT_WAIT_S = 60.0
"""How long a watched run waits for the sweep's verdict on a step before it goes on unwatched."""


class StoppedEarly(LmforgeError):
    """Pretraining ended at a sweep's request before max_steps (its checkpoint is kept)."""

    def __init__(self, step: int) -> None:
        super().__init__(
            f"stopped early at step {step} by the sweep (ASHA on val_loss); its model is "
            f"committed under train.stopped_at={step}"
        )
        self.step = step

    def __reduce__(self):  # rebuilt from its step where Ray hands it to the driver
        return (type(self), (self.step,))


def stop_request_file(store_location: str, key: str) -> str | None:
    """Where a sweep asks the pretrain run of `key` to stop; None for a store in a bucket
    (early stopping needs the store on a path the training workers see)."""
    if is_bucket(store_location):
        return None
    return str(local_path(store_location) / "pretrain" / f".{key}.stop.json")


def request_stop(path: str, request: dict[str, Any]) -> None:
    """Write the watch (atomically: a reader never sees half of one)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps(request))


def read_stop(path: str | None) -> dict[str, Any] | None:
    """The watch (`answered`, `stop`, and `stopped_at` once the run has stopped), or None."""
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def verdict(path: str | None, step: int, wait_s: float = VERDICT_WAIT_S) -> str:
    """The sweep's verdict on `step`: "stop", "go", "unwatched" (no sweep watches the run), or
    "late" (no verdict within `wait_s`)."""
    deadline = time.monotonic() + wait_s
    while True:
        request = read_stop(path)
        if request is None:
            return "unwatched"
        if request.get("stop"):
            return "stop"
        if int(request.get("answered", 0)) >= step:
            return "go"
        if time.monotonic() >= deadline:
            return "late"
        time.sleep(0.1)


def withdraw_stop(path: str | None) -> None:
    """Remove a request (answered, or left by a sweep that died)."""
    if path:
        Path(path).unlink(missing_ok=True)
