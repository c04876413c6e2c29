"""conf/deepspeed/zeroN.json, filled from the train config: one optimizer setup for every stage."""

from __future__ import annotations

import json

import pytest

from lmforge.pipeline.training.deepspeed_config import deepspeed_config, zero_config_text
from lmforge.pipeline.training.train_config import TrainConfig


def _values(node, prefix=""):
    for key, value in node.items():
        if isinstance(value, dict):
            yield from _values(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_every_stage_file_fills_completely_with_consistent_batch_sizes(stage):
    cfg = TrainConfig(zero_stage=stage, global_batch_size=32, micro_batch_size=4, num_workers=2)
    config = deepspeed_config(cfg, world_size=2)
    assert config["zero_optimization"]["stage"] == stage
    assert "auto" not in dict(_values(config)).values()
    assert config["train_batch_size"] == (
        config["train_micro_batch_size_per_gpu"] * config["gradient_accumulation_steps"] * 2
    )
    assert config["gradient_accumulation_steps"] == 4
    # parameters and optimizer states stay fp32 at every stage: bf16 is autocast
    assert not config["bf16"]["enabled"] and not config["fp16"]["enabled"]


def test_clipping_is_left_to_the_train_step_under_zero_0_and_to_deepspeed_above():
    assert deepspeed_config(TrainConfig(zero_stage=0, num_workers=1), 1)["gradient_clipping"] == 0
    cfg = TrainConfig(zero_stage=2, num_workers=1, grad_clip=0.5)
    assert deepspeed_config(cfg, 1)["gradient_clipping"] == 0.5


def test_offload_moves_optimizer_state_and_parameters_to_the_cpu():
    cfg = TrainConfig(zero_stage=3, num_workers=1, offload_optimizer=True, offload_params=True)
    zero = deepspeed_config(cfg, 1)["zero_optimization"]
    assert zero["offload_optimizer"]["device"] == "cpu"
    assert zero["offload_param"]["device"] == "cpu"
    plain = deepspeed_config(TrainConfig(zero_stage=3, num_workers=1), 1)["zero_optimization"]
    assert plain["offload_optimizer"]["device"] == "none"


def test_the_batch_sizes_follow_the_actual_world_size():
    cfg = TrainConfig(global_batch_size=16, micro_batch_size=2, num_workers=2)
    assert deepspeed_config(cfg, world_size=1)["gradient_accumulation_steps"] == 8
    with pytest.raises(ValueError, match="multiple"):
        deepspeed_config(cfg, world_size=3)


def test_the_stage_files_are_plain_json_that_deepspeed_users_can_read():
    for stage in range(4):
        assert json.loads(zero_config_text(stage))["zero_optimization"]["stage"] == stage


def test_bf16_is_the_engines_own_autocast_with_gradients_reduced_in_fp32():
    cfg = TrainConfig(zero_stage=2, num_workers=1)
    on = deepspeed_config(cfg, 1, bf16=True)["torch_autocast"]
    assert on == {"enabled": True, "dtype": "bfloat16", "lower_precision_safe_modules": []}
    assert deepspeed_config(cfg, 1)["torch_autocast"]["enabled"] is False
