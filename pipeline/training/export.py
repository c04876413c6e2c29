"""The trained model, written from the final sharded checkpoint one tensor at a time.

`export_checkpoint` runs a Ray task on this node (the output directories are local to it) that
declares the memory it needs: about one copy of the fp32 weights, never the optimizer state.
A small model (fp32 weights up to `IN_PROCESS_WEIGHTS`) is exported in the calling process
instead: a task's fresh worker process costs seconds of start-up and imports, more than such a
model takes to write. The export fetches only the model shards (from a bucket into a staging
directory of its own, hashed as they arrive; a local checkpoint is hashed in place), and writes
`model/` (`model.safetensors` + `config.json`, for `lmforge.model.weights.load_model_dir`) and,
when asked, the Hugging Face export: each tensor is assembled from its ranges in the shards
when the writer reaches it, and dropped once written. The checkpoint's layout names the tensors
and their shapes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from lmforge.model.config import ModelConfig
from lmforge.model.flops import parameters
from lmforge.model.hf_export import stream_export_hf
from lmforge.model.weights import stream_model_dir
from lmforge.pipeline.cluster.process_stats import (
    release_freed_memory,
    reset_peak_rss,
    rss_bytes,
    task_peak_rss_bytes,
)
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, Layout, numel_of
from lmforge.pipeline.training.checkpoint.store import open_store

EXPORTER = -1
"""The staging slot of the export task (ranks are 0 and up)."""
BASE_MEMORY = 1 << 30
"""What the export process holds besides the tensors (Python, torch, transformers)."""
IN_PROCESS_WEIGHTS = 256 << 20
"""fp32 weights up to this size (64M parameters) are exported in the calling process: on two
cores the task's worker took 4.6 s to start and import torch, of a 6-8 s export of the tiny
preset's model, and this much needs no memory reservation of its own."""


@dataclass(frozen=True, slots=True)
class HFExport:
    """Where and with what the Hugging Face export is written."""

    out_dir: str
    tokenizer_dir: str | None
    """Its tokenizer files are copied beside the weights (None: weights and config only)."""
    eos_token_id: int | None


def export_memory(model_cfg: ModelConfig) -> int:
    """Bytes the export task declares: 1.5x the fp32 weights and the process itself."""
    return int(1.5 * 4 * parameters(model_cfg)) + BASE_MEMORY


def export_checkpoint(
    location: str,
    model_cfg: ModelConfig,
    model_dir: str,
    hf: HFExport | None = None,
    *,
    in_process: bool | None = None,
) -> dict:
    """Write `model_dir` (and the HF export) from the checkpoint at `location`, in a Ray task
    on this node (in this process for a small model); returns {"export_format",
    "export_rss_rise_bytes" (the exporting process's peak resident memory above what it held
    when the export started; in this process, how far the export raised its peak),
    "export_cpu_s", "export_in_process"}. in_process: force one path (None: by the size)."""
    if in_process is None:
        in_process = 4 * parameters(model_cfg) <= IN_PROCESS_WEIGHTS
    if in_process:
        return _export_in_this_process(location, model_cfg, model_dir, hf)
    here = ray.get_runtime_context().get_node_id()
    # No CPU of its own: the stage waits on it, and a stage placed on a node without CPUs (a
    # cluster's head) could never schedule it there.
    task = _export.options(
        num_cpus=0,
        memory=export_memory(model_cfg),
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
    )
    return ray.get(task.remote(location, model_cfg, model_dir, hf))


@ray.remote(max_retries=0)
def _export(location: str, model_cfg: ModelConfig, model_dir: str, hf: HFExport | None) -> dict:
    cpu = time.process_time()
    # A reused worker's earlier peaks do not count, nor what it had freed and still held (the
    # reset releases it): the rise is over what the worker holds once that is gone.
    reset_peak_rss()
    before = rss_bytes() or 0
    export_format = write_exports(location, model_cfg, model_dir, hf)
    return {
        "export_format": export_format,
        "export_rss_rise_bytes": max(0, task_peak_rss_bytes() - before),
        "export_cpu_s": time.process_time() - cpu,
        "export_in_process": False,
    }


def _export_in_this_process(
    location: str, model_cfg: ModelConfig, model_dir: str, hf: HFExport | None
) -> dict:
    # The peak is not reset: it is the calling stage's, which reports it when it ends.
    peak, cpu = task_peak_rss_bytes(), time.process_time()
    export_format = write_exports(location, model_cfg, model_dir, hf)
    rise = max(0, task_peak_rss_bytes() - peak)
    release_freed_memory()  # the stage's process is a Ray worker that lives on
    return {
        "export_format": export_format,
        "export_rss_rise_bytes": rise,
        "export_cpu_s": time.process_time() - cpu,
        "export_in_process": True,
    }


def write_exports(
    location: str, model_cfg: ModelConfig, model_dir: str, hf: HFExport | None
) -> str | None:
    """The task's work, in this process: fetch and check the model shards, stream them out;
    returns the HF export's format (None without one)."""
    store = open_store(location.rstrip("/").rsplit("/", 1)[0])
    try:
        directory, layout = _fetch_model_shards(store, location)
        read = layout.reader(directory)

        def tensor_of(name: str):
            return read(name, 0, numel_of(layout.shapes[name])).view(layout.shapes[name])

        stream_model_dir(model_cfg, tensor_of, model_dir, layout.shapes)
        export_format = None
        if hf is not None:
            result = stream_export_hf(
                model_cfg,
                tensor_of,
                hf.out_dir,
                hf.tokenizer_dir,
                eos_token_id=hf.eos_token_id,
                shapes=layout.shapes,
            )
            export_format = result.format
    finally:
        store.release(EXPORTER)
    return export_format


def _fetch_model_shards(store, location: str) -> tuple[Path, Layout]:
    listed = store.listed(location)
    first = [LAYOUT_FILE if LAYOUT_FILE in listed else ckpt.MODEL_FILE]
    directory, problem = store.fetch(location, first, EXPORTER)
    if problem is None:
        layout = Layout.of(directory)
        everything = {name: (0, numel_of(shape)) for name, shape in layout.shapes.items()}
        shards = sorted(layout.files_for(everything, optimizer=False) - set(first))
        directory, problem = store.fetch(location, shards, EXPORTER)
    if problem is not None:
        raise ckpt.CheckpointError(f"the final checkpoint {location} is not usable: {problem}")
    return directory, layout
