"""lmforge's training steps on a model case, in its worker layout: the `pretrain` calibration case
times them, and `bench/train_throughput.py` races them against a plain PyTorch loop.

Two cases: `base` (n_layer=4, n_head=4, d_model=256, block 256, vocab 8192, 8 sequences a step,
one Ray Train worker under DeepSpeed ZeRO 0 holding every CPU) and `tiny`, the tiny preset's
model, batch and layout read from `conf/preset/tiny.yaml` (so neither can drift from what `make
demo` trains), which overrides change as on `lmforge run`'s command line.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import numpy as np

from lmforge.model.config import ModelConfig
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.training.data.sample_index import build_for_data
from lmforge.pipeline.training.launch import run_pretraining
from lmforge.pipeline.training.precision import expects_bf16
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.tokenizer.shards import TokenShardWriter
from lmforge.tokenizer.split_index import index_committed_shards

BASE = ModelConfig(vocab_size=8192, block_size=256, d_model=256, n_head=4, n_layer=4, d_ff=1024)


@dataclasses.dataclass(frozen=True)
class Case:
    """What one `--model` case trains, and lmforge's layout for it."""

    model: ModelConfig
    batch: int
    """Sequences per optimizer step."""
    micro_batch: int
    """Sequences per worker per forward pass."""
    workers: int
    stage: int
    unlikelihood: float = 0.0
    """`train.unlikelihood`: both loops add the same term to cross-entropy."""
    bf16: bool = False
    """bf16 on this CPU (`train.precision=bf16`, or a native choice such as the preset's on a
    CPU where it autocasts, `precision.py`): both loops run their forward passes under CPU bf16
    autocast."""
    pin_cpus: bool = True
    """`train.pin_cpus`: lmforge's training threads each on their own CPU."""
    keep_freed_memory: bool = True
    """`train.keep_freed_memory`: lmforge's workers keep the memory their steps free."""

    @property
    def precision(self) -> str:
        """`train.precision` of lmforge's runs (and the plain loop's autocast)."""
        return "bf16" if self.bf16 else "fp32"


def base_case() -> Case:
    """One worker holding every CPU under ZeRO 0, 8 sequences a step."""
    return Case(BASE, batch=8, micro_batch=8, workers=1, stage=0)


def tiny_case(overrides: list[str]) -> Case:
    """The tiny preset's model, batch and worker layout (what `make demo` trains)."""
    config = compose(["preset=tiny", *overrides])
    train = config["train"]
    model = ModelConfig.from_dict(
        {**config["model"], "vocab_size": config["tokenizer"]["vocab_size"]}
    )
    return Case(
        model,
        batch=train["global_batch_size"],
        micro_batch=train["micro_batch_size"],
        workers=train["num_workers"],
        stage=train["zero_stage"],
        unlikelihood=train["unlikelihood"],
        # as lmforge resolves it on this CPU: "auto" is fp32, the native choices bf16 where the
        # CPU computes bf16 in hardware (AMX excepted in bf16_if_native_except_amx)
        bf16=expects_bf16(train["precision"], use_gpu=False),
        pin_cpus=train["pin_cpus"],
        keep_freed_memory=train["keep_freed_memory"],
    )


def case_for(name: str, overrides: list[str]) -> Case:
    """The `--model` case called `name` ("base" or "tiny"; overrides change the tiny preset)."""
    return tiny_case(overrides) if name == "tiny" else base_case()


SEED = 0


def write_shards(directory: Path, n_windows: int, model: ModelConfig) -> Path:
    """Random tokens, enough for `n_windows` windows of block_size + 1."""
    rng = np.random.default_rng(SEED)
    n_docs = n_windows * model.block_size // 200 + 2
    docs = [[0, *rng.integers(1, model.vocab_size, 200).tolist()] for _ in range(n_docs)]
    with TokenShardWriter(directory, "train", 0, model.vocab_size) as writer:
        writer.write_documents(docs)
    index_committed_shards(directory, "train")
    return directory


def train_config(case: Case, steps: int, *, cpus: int, compile: bool = False) -> TrainConfig:
    """lmforge's training configuration for `case`: its layout, precision and pinning, and the
    plain loop's optimizer settings."""
    return TrainConfig(
        max_steps=steps,
        global_batch_size=case.batch,
        micro_batch_size=case.micro_batch,
        num_workers=case.workers,
        cpus_per_worker=cpus // case.workers,
        zero_stage=case.stage,
        lr=3e-4,
        min_lr=3e-5,
        warmup_steps=2,
        weight_decay=0.1,
        grad_clip=1.0,
        checkpoint_every=0,
        log_every=5,
        seed=SEED,
        max_failures=0,
        precision=case.precision,
        pin_cpus=case.pin_cpus,
        keep_freed_memory=case.keep_freed_memory,
        compile=compile,
        unlikelihood=case.unlikelihood,
    )


def lmforge_run(
    root: Path,
    data_dir: Path,
    steps: int,
    case: Case,
    *,
    cpus: int,
    compile: bool = False,
) -> dict:
    """lmforge's training of `case` for `steps` steps over the shards in `data_dir`, in its
    layout: rank 0's summary (`step_seconds`: every step but the first; `time_*_s_total`: the
    steps' parts)."""
    cfg = train_config(case, steps, cpus=cpus, compile=compile)
    name = f"zero{case.stage}-{case.workers}w-{uuid.uuid4().hex[:6]}"
    positions = steps * case.batch
    build_for_data(
        root / name / "index",
        data_dir,
        block_size=case.model.block_size,
        seed=SEED,
        epoch_offsets=cfg.epoch_offsets,
        positions=positions,
    )
    summary = run_pretraining(
        model_cfg=case.model,
        train_cfg=cfg,
        data_dir=str(data_dir),
        sample_index_dir=str(root / name / "index"),
        out_dir=str(root / name / "model"),
        checkpoint_dir=str(root / name / "checkpoints"),
        storage_path=str(root / "ray_storage"),
    )
    return summary
