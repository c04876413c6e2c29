"""The DeepSpeed config of a run: `conf/deepspeed/zeroN.json` with its "auto" values filled in.

The JSON files hold what is fixed per ZeRO stage (bucket sizes, partitioning); every value
written "auto" comes from the `train` config here:

- batch sizes: `train_batch_size` = global batch, `train_micro_batch_size_per_gpu`,
  `gradient_accumulation_steps` = global / (micro * world size);
- `gradient_clipping` = train.grad_clip for ZeRO 1-3. Under ZeRO 0 it is 0 and the training step
  clips itself (DeepSpeed's stage-0 clipping discards the norm, which we log);
- `overlap_comm`: on for GPUs, off on CPU;
- ZeRO 1 leaves `contiguous_gradients` off: with whole-model buckets DeepSpeed would copy every
  gradient into one more buffer during the backward pass, to spare a GPU's allocator
  fragmentation; the tiny preset's step (two CPU workers) was 3-4% faster without it in
  interleaved runs, with the same losses bit for bit;
- `offload_optimizer` / `offload_param`: device "cpu" or "none" from train.offload_*, pinned
  memory on GPU only.

DeepSpeed's own bf16/fp16 modes stay off: parameters and optimizer states are fp32 and bf16 is
torch autocast around the forward pass, so the optimizer and its state are the same at every stage.
The autocast is the engine's own (`torch_autocast`, from `bf16`): DeepSpeed's forward switches
off an autocast opened around it (so one opened by the caller silently trains in fp32), and opens
its own when this section says so. `lower_precision_safe_modules` is empty: gradients are
reduced in fp32, as without autocast (DeepSpeed's default would reduce Linear gradients in bf16).
The optimizer itself is ours (torch AdamW), passed to `deepspeed.initialize`, hence
`zero_force_ds_cpu_optimizer: false` (offload keeps torch AdamW instead of DeepSpeedCPUAdam).
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from lmforge.pipeline.training.train_config import TrainConfig

AUTO = "auto"


def zero_config_text(stage: int) -> str:
    """The packaged JSON of ZeRO `stage` (conf/deepspeed/zero{stage}.json)."""
    return (files("lmforge.conf") / "deepspeed" / f"zero{stage}.json").read_text()


def deepspeed_config(cfg: TrainConfig, world_size: int, bf16: bool = False) -> dict[str, Any]:
    """The filled-in DeepSpeed config for `cfg.zero_stage` on `world_size` workers; `bf16`:
    the engine runs its forward passes under bf16 autocast (see `precision.uses_bf16`)."""
    name = f"conf/deepspeed/zero{cfg.zero_stage}.json"
    config = json.loads(zero_config_text(cfg.zero_stage))
    stage = config.get("zero_optimization", {}).get("stage")
    if stage != cfg.zero_stage:
        raise ValueError(
            f"{name} declares zero_optimization.stage={stage!r}, expected {cfg.zero_stage}"
        )
    per_step = cfg.micro_batch_size * world_size
    if cfg.global_batch_size % per_step:
        raise ValueError(
            f"train.global_batch_size={cfg.global_batch_size} is not a multiple of "
            f"micro_batch_size * world size = {per_step}"
        )
    offload = {"offload_optimizer": cfg.offload_optimizer, "offload_param": cfg.offload_params}
    values: dict[str, Any] = {
        "train_batch_size": cfg.global_batch_size,
        "train_micro_batch_size_per_gpu": cfg.micro_batch_size,
        "gradient_accumulation_steps": cfg.global_batch_size // per_step,
        "gradient_clipping": cfg.grad_clip if cfg.zero_stage > 0 else 0.0,
        "zero_optimization.overlap_comm": cfg.use_gpu,
    }
    for section, enabled in offload.items():
        values[f"zero_optimization.{section}.device"] = "cpu" if enabled else "none"
        values[f"zero_optimization.{section}.pin_memory"] = cfg.use_gpu
    _fill(config, values, name, prefix="")
    config["torch_autocast"] = {
        "enabled": bf16,
        "dtype": "bfloat16",
        "lower_precision_safe_modules": [],
    }
    return config


def _fill(node: dict[str, Any], values: dict[str, Any], name: str, prefix: str) -> None:
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            _fill(value, values, name, prefix=f"{path}.")
        elif value == AUTO:
            if path not in values:
                raise ValueError(
                    f"{name}: '{path}' is \"auto\" but lmforge has no value for it; "
                    "write a concrete value in the file"
                )
            node[key] = values[path]
