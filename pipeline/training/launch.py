"""Run distributed pretraining on a Ray cluster: `run_pretraining`, called by the pretrain stage.

It assumes Ray is initialised. It starts a Ray Train `TorchTrainer` whose workers run
`worker_entry.train_loop_per_worker`, waits for it, and writes the final weights of the last
checkpoint as a model directory in `out_dir` (model.safetensors + config.json, loadable with
`lmforge.model.weights.load_model_dir`), and the Hugging Face export when asked, in a Ray task on
this node that streams them out of the sharded checkpoint (`export`). Ray Train reports where
that checkpoint lives, so rank 0 may run on any node; the per-step losses come back in the
summary.

Resuming is automatic: a worker failure restarts the workers from the last checkpoint reported
to Ray Train (up to `train.max_failures` times), and a new call with the same `checkpoint_dir`
continues from its newest valid checkpoint (an interrupted run, or a finished one whose
`train.max_steps` was raised).

With `train.local_mode` the one worker trains in this process instead (`local_mode`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig

from lmforge.model.config import ModelConfig
from lmforge.pipeline.cluster.process_stats import kept_memory_tunables
from lmforge.pipeline.storage.location import is_bucket, local_path
from lmforge.pipeline.training.checkpoint.marker import CheckpointError
from lmforge.pipeline.training.checkpoint.ray_checkpoint import pointed_location
from lmforge.pipeline.training.export import HFExport, export_checkpoint
from lmforge.pipeline.training.fault import FaultInjection
from lmforge.pipeline.training.local_mode import (
    FINAL_LOCATION,
    in_this_process,
    quiet_local_mode_notice,
)
from lmforge.pipeline.training.payload import TrainingPayload
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.trainer import PipelineTrainer
from lmforge.pipeline.training.worker_entry import train_loop_per_worker


def _location(directory: str | os.PathLike) -> str | os.PathLike:
    """A local directory as a string; a store's input artifact as it is (each worker reads it
    through its own node's cache)."""
    return str(directory) if isinstance(directory, str | Path) else directory


class PretrainingError(RuntimeError):
    """The training run failed for good (after Ray Train's restarts)."""


def run_pretraining(
    *,
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    data_dir: str | os.PathLike | list,
    sample_index_dir: str | os.PathLike,
    out_dir: str,
    checkpoint_dir: str,
    storage_path: str,
    tracking_uri: str | None = None,
    mlflow_run_id: str | None = None,
    run_name: str | None = None,
    fault: FaultInjection | None = None,
    hf_export: HFExport | None = None,
    stop_file: str | None = None,
) -> dict[str, Any]:
    """Train `model_cfg` on the token shards in `data_dir` in the order of the sample index in
    `sample_index_dir`, write the final model directory into `out_dir`, and return a summary.
    Each directory may be a store's input artifact, which every worker reads through its own
    node's cache.

    checkpoint_dir: our checkpoints, kept across calls (key it by the stage's cache key);
        a shared path or a URI (s3://...) that every node reaches. storage_path: Ray Train's
        storage (its copies of the reported checkpoints, run state), a shared path or a URI.
        The summary holds steps, tokens, initial/final loss, the per-step losses, tokens/s
        and MFU. hf_export: also write the Hugging Face export (its format is in the summary).
        stop_file: where a sweep asks this run to stop early (`early_stop`); a run that
        stopped has `stopped_early_at` in its summary and exports nothing.
    """
    payload = TrainingPayload(
        model=model_cfg,
        train=train_cfg,
        data_dir=[_location(d) for d in data_dir]
        if isinstance(data_dir, list | tuple)
        else _location(data_dir),
        sample_index_dir=_location(sample_index_dir),
        checkpoint_dir=checkpoint_dir
        if is_bucket(checkpoint_dir)
        else str(local_path(checkpoint_dir).resolve()),
        tracking_uri=tracking_uri,
        mlflow_run_id=mlflow_run_id,
        fault=fault,
        stop_file=stop_file,
    )
    name = run_name or f"pretrain-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    trainer = PipelineTrainer(
        train_loop_per_worker,
        train_loop_config={"payload": payload},
        scaling_config=scaling_config(train_cfg),
        run_config=RunConfig(
            name=name,
            storage_path=str(storage_path),
            failure_config=FailureConfig(max_failures=train_cfg.max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=max(1, train_cfg.keep_checkpoints)),
            worker_runtime_env=worker_runtime_env(train_cfg),
        ),
        torch_config=TorchConfig(backend="nccl" if train_cfg.use_gpu else "gloo"),
    )
    try:
        with in_this_process() if train_cfg.local_mode else contextlib.nullcontext():
            result = trainer.fit()
    except Exception as exc:  # Ray Train raises its own error types; name the run and the fix
        raise PretrainingError(
            f"pretraining failed ({root_cause(exc)}). Checkpoints so far are in "
            f"{checkpoint_dir}; rerunning continues from the newest one."
        ) from exc
    summary = dict(result.metrics or {})
    location = summary.pop(FINAL_LOCATION, None)  # a local run's: Ray Train keeps no copy
    if location is None and result.checkpoint is None:
        raise PretrainingError("pretraining finished without reporting a checkpoint")
    if summary.get("stopped_early_at") is not None:
        _remove_run_dir(str(storage_path), name)
        return summary
    location = location or pointed_location(result.checkpoint)
    try:
        exported = export_checkpoint(location, model_cfg, str(out_dir), hf_export)
    except CheckpointError as exc:
        raise PretrainingError(f"exporting the trained model failed: {exc}") from exc
    summary.update(exported, model_dir=str(out_dir))
    _remove_run_dir(str(storage_path), name)
    return summary


def worker_runtime_env(train_cfg: TrainConfig) -> dict[str, Any]:
    """The training workers' runtime environment: with `train.keep_freed_memory`, glibc's
    tunables that keep freed memory mapped from the workers' start (`kept_memory_tunables`;
    one arena can only be chosen before the training thread's first allocation)."""
    if not train_cfg.keep_freed_memory:
        return {}
    return {"env_vars": {"GLIBC_TUNABLES": kept_memory_tunables(os.environ)}}


def _remove_run_dir(storage_path: str, name: str) -> None:
    """Ray Train's copies of a finished run are redundant with `checkpoint_dir`: drop them."""
    if not is_bucket(storage_path):
        shutil.rmtree(local_path(storage_path) / name, ignore_errors=True)
        return
    import pyarrow.fs as pafs

    fs, base = pafs.FileSystem.from_uri(storage_path.rstrip("/"))
    # nothing uploaded, or the store refuses deletes: its lifecycle rules apply then
    with contextlib.suppress(OSError):
        fs.delete_dir(f"{base}/{name}")


_ERROR_LINE = re.compile(r"^(?:\(\S+ pid=\d+\)\s*)?([\w.]*(?:Error|Exception|Interrupt)\b.*)$")


def root_cause(exc: BaseException) -> str:
    """The innermost `SomeError: message` line of a Ray Train failure (its text holds the
    workers' tracebacks), else the exception's own first line."""
    causes = [m.group(1) for m in map(_ERROR_LINE.match, str(exc).splitlines()) if m]
    if causes:
        return causes[-1].strip()[:300]
    first = next((line for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first.strip()[:300]}"


def scaling_config(cfg: TrainConfig) -> ScalingConfig:
    """Workers, their resources and their placement across nodes."""
    resources: dict[str, float] = {"CPU": cfg.cpus_per_worker}
    if cfg.use_gpu:
        resources["GPU"] = 1
    with quiet_local_mode_notice() if cfg.local_mode else contextlib.nullcontext():
        return ScalingConfig(
            num_workers=0 if cfg.local_mode else cfg.num_workers,  # 0: Ray Train's local mode
            use_gpu=cfg.use_gpu,
            resources_per_worker=resources,
            placement_strategy=cfg.placement_strategy,
        )
