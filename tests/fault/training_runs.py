"""Helpers of the kill-and-resume tests: tiny learnable token shards, a tiny model with a constant
learning rate, and a wrapper that gives every run its own directories.

The learning rate is constant (warmup 0, min_lr = lr) so that a run's trajectory does not depend
on `max_steps`: a finished run whose max_steps is raised must then continue exactly like a run
that was given the larger max_steps from the start. The schedules are unit-tested on their own.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import ray.cloudpickle

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.data.sample_index import build_for_data
from lmforge.pipeline.training.launch import run_pretraining
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
"""`Runs` goes to Ray tasks by value: their workers cannot import tests/ (a local-mode run trains
in a task's process, as the pretrain stage's does)."""

VOCAB = 64
MODEL = ModelConfig(vocab_size=VOCAB, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
BASE = TrainConfig(
    max_steps=12,
    global_batch_size=8,
    micro_batch_size=2,
    num_workers=2,
    zero_stage=2,
    lr=3e-3,
    min_lr=3e-3,
    warmup_steps=0,
    checkpoint_every=4,
    keep_checkpoints=3,
    log_every=1,
    seed=7,
    max_failures=0,
    cpus_per_worker=1,
)


def train_config(**overrides) -> TrainConfig:
    return dataclasses.replace(BASE, **overrides)


def write_token_shards(directory: Path, n_docs: int = 200, seed: int = 0) -> Path:
    """Documents that are arithmetic progressions mod the vocabulary: easy to learn."""
    rng = np.random.default_rng(seed)
    docs = [
        [0] + [int((start + k * stride) % (VOCAB - 1) + 1) for k in range(40)]
        for start, stride in zip(
            rng.integers(1, VOCAB, n_docs), rng.integers(1, 5, n_docs), strict=True
        )
    ]
    with TokenShardWriter(directory, "train", 0, VOCAB) as writer:
        writer.write_documents(docs)
    index_committed_shards(directory, "train")
    return directory


def sample_index_for(root: Path, data_dir: Path, cfg: TrainConfig) -> Path:
    """The sample index a run of `cfg` reads, as the sample_index stage builds it."""
    build_for_data(
        root,
        data_dir,
        block_size=MODEL.block_size,
        seed=cfg.seed,
        epoch_offsets=cfg.epoch_offsets,
        positions=cfg.max_steps * cfg.global_batch_size,
    )
    return root


class Runs:
    """Calls run_pretraining with its own out/checkpoint/storage directories under `root`."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.root, self.data_dir = root, data_dir
        self.storage = root / "ray_storage"

    def train(self, name: str, cfg: TrainConfig, *, checkpoint_dir: Path | None = None, **kw):
        return run_pretraining(
            model_cfg=MODEL,
            train_cfg=cfg,
            data_dir=str(self.data_dir),
            sample_index_dir=str(sample_index_for(self.root / name / "index", self.data_dir, cfg)),
            out_dir=str(self.root / name / "model"),
            checkpoint_dir=str(checkpoint_dir or self.root / name / "checkpoints"),
            storage_path=str(self.storage),
            **kw,
        )


def assert_same_losses(actual: list[float], expected: list[float], rel: float = 1e-3) -> None:
    assert len(actual) == len(expected)
    for step, (a, e) in enumerate(zip(actual, expected, strict=True), start=1):
        assert abs(a - e) <= rel * abs(e), f"step {step}: loss {a} vs uninterrupted {e}"
