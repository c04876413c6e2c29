"""What Ray Train runs on every worker: `train_loop_per_worker({"job": TrainingJob})`.

Kept apart from `worker`, which imports torch, DeepSpeed and the rest of training: Ray Train's
controller unpickles the entry point and its config, so whatever their module imports, the
controller imports too, before it starts any worker (4.5 s of imports on the critical path of
every run on two cores). Here the entry point imports `worker` only once it runs on a worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.config import TrainConfig
from lmforge.pipeline.training.fault import FaultInjection


@dataclass(kw_only=True, slots=True)
class TrainingJob:
    """Everything a worker needs; small and picklable (the data is passed by location)."""

    model: ModelConfig
    """The model to train."""
    train: TrainConfig
    """Optimizer, schedule, parallelism, checkpointing."""
    data_dir: str
    """Directory of the tokenize stage's token shards (opened with TokenDataset)."""
    sample_index_dir: str
    """Directory of the sample index of `data_dir` for this run's seed and block size."""
    split: str = "train"
    """Split to train on."""
    checkpoint_dir: str
    """Where checkpoints live across runs of the same key, reachable from every node: a shared
    path or a URI such as s3://bucket/checkpoints/<key> (see `checkpoint.store`)."""
    tracking_uri: str | None = None
    """MLflow tracking URI; with `mlflow_run_id`, rank 0 logs metrics into that run."""
    mlflow_run_id: str | None = None
    """The pretrain stage's MLflow run."""
    fault: FaultInjection | None = None
    """Test/drill hook: one worker SIGKILLs itself once."""


def train_loop_per_worker(config: dict) -> None:
    """Ray Train entry point; `config["job"]` is a TrainingJob."""
    name_deepspeed_accelerator(config["job"].train)
    from lmforge.pipeline.training.worker import run_worker

    run_worker(config["job"])


def name_deepspeed_accelerator(cfg: TrainConfig) -> None:
    """Tell DeepSpeed a CPU run's accelerator before it is imported (unless the environment
    names one): left to detect it, DeepSpeed warns on every rank that it found no GPU ("If you
    have GPU or other accelerator, we were unable to detect it"), which reads as a fault in a run
    meant for CPUs."""
    if not cfg.use_gpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
