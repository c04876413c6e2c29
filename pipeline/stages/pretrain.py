"""`pretrain`: the decoder-only transformer trained with Ray Train + DeepSpeed ZeRO.

Checkpoints live outside the artifact, under `<workdir>/checkpoints/pretrain/<lineage>/`, where
the lineage key is the cache key without the settings that do not change the trajectory
(`TRAJECTORY_NEUTRAL`): an interrupted run resumes from its latest checkpoint, raising
`train.max_steps` continues a finished run, and a run may continue on another worker count.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from lmforge.model.config import ModelConfig
from lmforge.pipeline.keys import cache_key
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.training.config import TrainConfig
from lmforge.pipeline.typed_config import from_mapping


@dataclass(slots=True)
class PretrainConfig:
    model: ModelConfig
    train: TrainConfig


def parse(sections: dict) -> PretrainConfig:
    # The vocabulary size comes from the trained tokenizer at run time; 256 only validates.
    model = from_mapping(ModelConfig, {"vocab_size": 256, **sections["model"]}, "model")
    train = from_mapping(TrainConfig, sections["train"], "train")
    return PretrainConfig(model=model, train=train)


TRAJECTORY_NEUTRAL = (
    "max_steps",
    "num_workers",
    "zero_stage",
    "offload_optimizer",
    "offload_params",
    "cpus_per_worker",
    "placement_strategy",
    "checkpoint_every",
    "keep_checkpoints",
    "log_every",
    "max_failures",
    "peak_flops",
)
"""Settings that do not change the training trajectory: a run may continue from another's
checkpoints with different values (more steps, another worker count or ZeRO stage)."""


def lineage_key(ctx: StageContext) -> str:
    """The cache key without trajectory-neutral settings: where this run's checkpoints live."""
    train = asdict(ctx.config.train)
    for name in TRAJECTORY_NEUTRAL:
        train.pop(name, None)
    return cache_key(
        "pretrain-lineage",
        "1",
        {"model": asdict(ctx.config.model), "train": train},
        {k: v["key"] for k, v in ctx.input_manifests.items()},
    )


@stage(
    name="pretrain",
    inputs=("tokenize", "sample_index", "train_tokenizer"),
    config=("model", "train"),
    parse_config=parse,
    version="1",
    num_cpus=0,  # it drives Ray Train workers, which hold the CPUs
)
def pretrain(ctx: StageContext) -> dict:
    from lmforge.pipeline.training.driver import run_pretraining
    from lmforge.pipeline.training.export import HFExport
    from lmforge.tokenizer.convention import eot_id
    from lmforge.tokenizer.io import load_tokenizer

    tok = load_tokenizer(ctx.input("train_tokenizer"))
    model_cfg = ModelConfig(**{**asdict(ctx.config.model), "vocab_size": tok.get_vocab_size()})
    checkpoint_dir = ctx.shared_location("checkpoints", "pretrain", lineage_key(ctx))
    summary = run_pretraining(
        model_cfg=model_cfg,
        train_cfg=ctx.config.train,
        # With a bucket store, InputPaths: each worker streams the token shards (and maps the
        # sample index) through its own node's cache, needing no shared filesystem nor this node.
        data_dir=ctx.input("tokenize"),
        sample_index_dir=ctx.input("sample_index"),
        out_dir=str(ctx.out_dir / "model"),
        checkpoint_dir=checkpoint_dir,
        storage_path=ctx.shared_location("ray_storage"),
        tracking_uri=ctx.tracking_uri,
        mlflow_run_id=ctx.mlflow_run_id,
        hf_export=HFExport(
            out_dir=str(ctx.out_dir / "hf"),
            tokenizer_dir=str(ctx.input("train_tokenizer")),
            eos_token_id=eot_id(tok),
        ),
    )
    (ctx.out_dir / "training_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    result = {
        k: v for k, v in summary.items() if isinstance(v, int | float | str) and k != "model_dir"
    }
    if ctx.tracking_uri and ctx.mlflow_run_id:
        from lmforge.pipeline.stages.mlflow_model import log_text_generator

        result["mlflow_model_uri"] = log_text_generator(
            ctx.tracking_uri, ctx.mlflow_run_id, ctx.out_dir, ctx.input("train_tokenizer")
        )
    result["checkpoint_dir"] = checkpoint_dir
    return result
