"""The training payload: everything a worker is given (`worker_entry.train_loop_per_worker`).

Light (no torch, no DeepSpeed): Ray Train's controller unpickles it with the entry point, before
it starts any worker, and imports whatever its module imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.fault import FaultInjection
from lmforge.pipeline.training.train_config import TrainConfig


@dataclass(kw_only=True, slots=True)
class TrainingPayload:
    """Everything a worker needs; small and picklable (the data is passed by location)."""

    model: ModelConfig
    """The model to train."""
    train: TrainConfig
    """Optimizer, schedule, parallelism, checkpointing."""
    data_dir: str | list
    """Directory of the tokenize stage's token shards (opened with TokenDataset); a mixture's
    list of each source's, in its order (`MixtureDataset`)."""
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
    stop_file: str | None = None
    """Where a sweep asks this run to stop early (`early_stop.stop_request_file`)."""
