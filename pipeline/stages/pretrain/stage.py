"""`pretrain`: the decoder-only transformer trained with Ray Train + DeepSpeed ZeRO.

Checkpoints live outside the artifact, under `<workdir>/checkpoints/pretrain/<lineage>/`, where
the lineage key is the cache key without the settings that do not change the trajectory
(`TRAJECTORY_NEUTRAL`): an interrupted run resumes from its latest checkpoint, raising
`train.max_steps` continues a finished run when the learning rate does not depend on it (see
`trajectory_neutral`), and a run may continue on another worker count.

Runs of several keys can therefore share a lineage's checkpoints (another `max_steps`, worker
count or `keep_checkpoints`), at once too. The lineage belongs to the holder of its lease,
`checkpoints/pretrain/.<lineage>.lease.json`: one run at a time resumes from its checkpoints,
writes and prunes them; another waits for it, then continues from where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from lmforge.model.config import ModelConfig
from lmforge.pipeline.engine.keys import cache_key, without_unkeyed
from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.training.schedule import rate_depends_on_max_steps
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.typed_config import from_mapping


@dataclass(slots=True)
class PretrainConfig:
    model: ModelConfig
    train: TrainConfig


def parse(sections: dict) -> PretrainConfig:
    # The vocabulary size comes from the trained tokenizer at run time; 256 only validates.
    model = from_mapping(ModelConfig, {"vocab_size": 256, **sections["model"]}, "model")
    train = from_mapping(TrainConfig, sections["train"], "train")
    decoded = sum(train.sequence_decoding(model.block_size))
    if train.sequence_unlikelihood > 0 and decoded > model.block_size:
        raise ValueError(
            f"train.sequence_unlikelihood_prefix + train.sequence_unlikelihood_tokens = {decoded} "
            f"must be <= model.block_size = {model.block_size}"
        )
    return PretrainConfig(model=model, train=train)


UNKEYED: dict[str, object] = {
    "train.eval_every": 0,
    "train.eval_windows": 16,
    "train.stopped_at": None,
    "train.local_mode": False,
}
"""`model.*` and `train.*` keys added after 0.1.0, at the value that trains as 0.1.0 did: left
out of the cache key and the lineage there (see `StageSpec.unkeyed`)."""

TRAJECTORY_NEUTRAL = (
    "max_steps",
    "num_workers",
    "zero_stage",
    "offload_optimizer",
    "offload_params",
    "cpus_per_worker",
    "pin_cpus",
    "keep_freed_memory",
    "placement_strategy",
    "checkpoint_every",
    "keep_checkpoints",
    "log_every",
    "max_failures",
    "local_mode",
    "peak_flops",
    "eval_every",
    "eval_windows",
    "stopped_at",
)
"""Settings that do not change the training trajectory: a run may continue from another's
checkpoints with different values (more steps, another worker count or ZeRO stage)."""


def trajectory_neutral(train: TrainConfig) -> tuple[str, ...]:
    """`TRAJECTORY_NEUTRAL` for this run: without `max_steps` where the learning rate depends on
    it. Under a cosine decay a 1500-step run's rate at step 1000 is not a 1650-step run's, so a
    finished run continued to a raised max_steps would give another model than a run given that
    max_steps from the start, under the same cache key. The sequence-level unlikelihood term
    runs on the last steps of a run: where it does, max_steps decides which steps those are."""
    if rate_depends_on_max_steps(train) or train.sequence_unlikelihood > 0:
        return tuple(name for name in TRAJECTORY_NEUTRAL if name != "max_steps")
    return TRAJECTORY_NEUTRAL


def lineage_of(model: ModelConfig, train: TrainConfig, input_keys: dict[str, str]) -> str:
    """The cache key without trajectory-neutral settings: where a run's checkpoints live."""
    settings = asdict(train)
    for name in trajectory_neutral(train):
        settings.pop(name, None)
    config = without_unkeyed({"model": asdict(model), "train": settings}, UNKEYED)
    return cache_key("pretrain-lineage", "1", config, input_keys)


def cpus_of_stage(cfg: PretrainConfig) -> float:
    """None when the stage drives Ray Train workers, which hold the CPUs; its one worker's when
    it trains in its own task (`train.local_mode`)."""
    return cfg.train.cpus_per_worker if cfg.train.local_mode else 0


def _token_data(ctx: StageContext):
    """The token shards: tokenize's artifact, or in a mixture each source's, in its order."""
    data = ctx.inputs_of("tokenize")
    return data[""] if "" in data else list(data.values())


def lineage_key(ctx: StageContext) -> str:
    """This stage run's lineage (`lineage_of` its configuration and inputs)."""
    input_keys = {k: v["key"] for k, v in ctx.input_manifests.items()}
    return lineage_of(ctx.config.model, ctx.config.train, input_keys)


@stage(
    name="pretrain",
    inputs=("tokenize", "sample_index", "train_tokenizer"),
    config=("model", "train"),
    parse_config=parse,
    version="1",
    unkeyed=UNKEYED,
    cpus_of=cpus_of_stage,
)
def pretrain(ctx: StageContext) -> dict:
    lineage = lineage_key(ctx)
    where = ("checkpoints", "pretrain", lineage)
    with ctx.holding(*where, what=f"the checkpoints of lineage {lineage}"):
        return _train(ctx, ctx.shared_location(*where))


def _train(ctx: StageContext, checkpoint_dir: str) -> dict:
    """Train from the newest checkpoint of `checkpoint_dir` (whose lease this run holds)."""
    from lmforge.pipeline.training.early_stop.requests import (
        StoppedEarly,
        read_stop,
        request_stop,
        stop_request_file,
    )
    from lmforge.pipeline.training.export import HFExport
    from lmforge.pipeline.training.launch import run_pretraining
    from lmforge.tokenizer.convention import eot_id
    from lmforge.tokenizer.io import load_tokenizer

    tok = load_tokenizer(ctx.input("train_tokenizer"))
    model_cfg = ModelConfig(**{**asdict(ctx.config.model), "vocab_size": tok.get_vocab_size()})
    stop_file = stop_request_file(ctx.store_uri or str(ctx.workdir / "store"), ctx.key)
    summary = run_pretraining(
        model_cfg=model_cfg,
        train_cfg=ctx.config.train,
        # With a bucket store, InputPaths: each worker streams the token shards (and maps the
        # sample index) through its own node's cache, needing no shared filesystem nor this node.
        data_dir=_token_data(ctx),
        sample_index_dir=ctx.input("sample_index"),
        out_dir=str(ctx.out_dir / "model"),
        checkpoint_dir=checkpoint_dir,
        storage_path=ctx.run_location("ray_storage"),
        tracking_uri=ctx.tracking_uri,
        mlflow_run_id=ctx.mlflow_run_id,
        stop_file=stop_file,
        hf_export=HFExport(
            out_dir=str(ctx.out_dir / "hf"),
            tokenizer_dir=str(ctx.input("train_tokenizer")),
            eos_token_id=eot_id(tok),
        ),
    )
    if summary.get("stopped_early_at") is not None:  # a sweep asked: not this key's model
        step = int(summary["stopped_early_at"])
        if stop_file:  # the answer the sweep waits for: where the checkpoint is
            request_stop(stop_file, {**(read_stop(stop_file) or {}), "stopped_at": step})
        raise StoppedEarly(step)
    (ctx.out_dir / "training_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    result = {
        k: v for k, v in summary.items() if isinstance(v, int | float | str) and k != "model_dir"
    }
    if ctx.tracking_uri and ctx.mlflow_run_id:
        from lmforge.pipeline.stages.pretrain.mlflow_model import log_text_generator

        result["mlflow_model_uri"] = log_text_generator(
            ctx.tracking_uri, ctx.mlflow_run_id, ctx.out_dir, ctx.input("train_tokenizer")
        )
    result["checkpoint_dir"] = checkpoint_dir
    return result
