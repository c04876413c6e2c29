"""Stopping a pretraining run early, when a sweep asks (`lmforge sweep --early-stop`).

The sweep decides (ASHA on `val_loss`) and writes a stop request for the pretrain key it stops,
`<store>/pretrain/.<key>.stop.json`, beside the key's lease. The training loop looks for it each
time it scores the validation slice; once it is there, the run saves a checkpoint at that step,
ends, and the stage raises `StoppedEarly` instead of committing: the model of a stopped variant is
not the model of its key. The sweep then commits it under a key of its own, `train.stopped_at=N`,
which resumes from that checkpoint (the same lineage) and trains no further.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.location import is_bucket, local_path


class StoppedEarly(LmforgeError):
    """Pretraining ended at a sweep's request before max_steps (its checkpoint is kept)."""

    def __init__(self, step: int) -> None:
        super().__init__(
            f"stopped early at step {step} by the sweep (ASHA on val_loss); its model is "
            f"committed under train.stopped_at={step}"
        )
        self.step = step


def stop_request_file(store_location: str, key: str) -> str | None:
    """Where a sweep asks the pretrain run of `key` to stop; None for a store in a bucket
    (early stopping needs the store on a path the training workers see)."""
    if is_bucket(store_location):
        return None
    return str(local_path(store_location) / "pretrain" / f".{key}.stop.json")


def request_stop(path: str, request: dict[str, Any]) -> None:
    """Ask the run to stop (atomically: a reader never sees half a request)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(request), encoding="utf-8")
    os.replace(partial, target)


def read_stop(path: str | None) -> dict[str, Any] | None:
    """The request (with `stopped_at` once the run has stopped), or None when there is none."""
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def withdraw_stop(path: str | None) -> None:
    """Remove a request (answered, or left by a sweep that died)."""
    if path:
        Path(path).unlink(missing_ok=True)
