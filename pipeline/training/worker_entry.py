"""What Ray Train runs on every worker: `train_loop_per_worker({"payload": TrainingPayload})`.

Kept apart from `worker`, which imports torch, DeepSpeed and the rest of training: Ray Train's
controller unpickles the entry point and its config, so whatever their module imports, the
controller imports too, before it starts any worker (4.5 s of imports on the critical path of
every run on two cores). Here the entry point imports `worker` only once it runs on a worker.
"""

from __future__ import annotations

import os

from lmforge.pipeline.training.train_config import TrainConfig


def train_loop_per_worker(config: dict) -> None:
    """Ray Train entry point; `config["payload"]` is a `payload.TrainingPayload`."""
    name_deepspeed_accelerator(config["payload"].train)
    from lmforge.pipeline.training.worker import run_worker

    run_worker(config["payload"])


def name_deepspeed_accelerator(cfg: TrainConfig) -> None:
    """Tell DeepSpeed a CPU run's accelerator before it is imported (unless the environment
    names one): left to detect it, DeepSpeed warns on every rank that it found no GPU ("If you
    have GPU or other accelerator, we were unable to detect it"), which reads as a fault in a run
    meant for CPUs."""
    if not cfg.use_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
