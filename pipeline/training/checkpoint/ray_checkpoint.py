"""What Ray Train keeps of a run's checkpoint: a pointer to it, never a copy of it.

At the end of a run every worker reports its summary, and rank 0 reports a directory holding
only `checkpoint.json` (the final checkpoint's location and step), which Ray Train copies to
its storage; `launch.run_pretraining` reads the location back from the run's result. The checkpoints
themselves stay in the run's checkpoint directory, written once.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import ray.train
from ray.train import Checkpoint

from lmforge.pipeline.training.checkpoint.marker import step_dir_name
from lmforge.pipeline.training.local_mode import FINAL_LOCATION

POINTER_FILE = "checkpoint.json"


def report_final(metrics: dict, rank: int, step: int, location: str, local: bool = False) -> None:
    """Every worker calls it once, at the end, with the location of the final checkpoint; a
    `local` run (Ray Train's local mode, which keeps no copy) reports it in its metrics."""
    if local:
        ray.train.report({**metrics, FINAL_LOCATION: location}, checkpoint=None)
        return
    if rank != 0:
        ray.train.report(metrics, checkpoint=None)
        return
    with tempfile.TemporaryDirectory(prefix="lmforge-pointer-") as tmp:
        pointer = {"location": location, "step": step}
        (Path(tmp) / POINTER_FILE).write_text(json.dumps(pointer))
        ray.train.report(
            metrics,
            checkpoint=Checkpoint.from_directory(tmp),
            checkpoint_dir_name=step_dir_name(step),
            delete_local_checkpoint_after_upload=False,  # the temporary directory goes itself
        )


def pointed_location(checkpoint: Checkpoint) -> str:
    """The location (path or URI) of the checkpoint a reported pointer names."""
    with checkpoint.as_directory() as directory:
        return json.loads((Path(directory) / POINTER_FILE).read_text())["location"]
