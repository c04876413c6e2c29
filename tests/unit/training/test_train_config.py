"""TrainConfig: typed, validated, and the repository's default YAML is valid."""

from __future__ import annotations

from importlib.resources import files

import pytest
import yaml

from lmforge.pipeline.cluster.process_stats import keeps_freed_memory
from lmforge.pipeline.training.launch import worker_runtime_env
from lmforge.pipeline.training.train_config import TrainConfig


def test_the_default_train_yaml_is_a_valid_config():
    text = (files("lmforge.conf") / "train" / "default.yaml").read_text()
    cfg = TrainConfig.from_dict(yaml.safe_load(text))
    assert cfg.global_batch_size % (cfg.micro_batch_size * cfg.num_workers) == 0


def test_an_unknown_key_is_named():
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 1e-3})


def test_gradient_accumulation_fills_the_global_batch_for_any_worker_count():
    cfg = TrainConfig(global_batch_size=32, micro_batch_size=4, num_workers=2)
    assert cfg.grad_accum_steps == 4
    assert cfg.with_workers(1).grad_accum_steps == 8
    assert cfg.with_workers(8).grad_accum_steps == 1


@pytest.mark.parametrize(
    ("stage", "workers", "offload", "runs_as"),
    [(1, 1, False, 0), (2, 1, False, 0), (2, 2, False, 2), (1, 2, False, 1), (0, 1, False, 0),
     (3, 1, False, 3), (2, 1, True, 2), (1, 1, True, 1)],
)  # fmt: skip
def test_zero_1_and_2_on_one_worker_run_as_zero_0(stage, workers, offload, runs_as):
    cfg = TrainConfig(
        zero_stage=stage, offload_optimizer=offload, num_workers=2, global_batch_size=8,
        micro_batch_size=4,
    )  # fmt: skip
    assert cfg.with_workers(workers).zero_stage == runs_as
    assert cfg.with_workers(workers).num_workers == workers


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"global_batch_size": 10, "micro_batch_size": 4, "num_workers": 1}, "multiple of"),
        ({"global_batch_size": 8, "micro_batch_size": 4, "num_workers": 3}, "multiple of"),
        ({"zero_stage": 4}, "zero_stage"),
        ({"zero_stage": 0, "offload_optimizer": True}, "offload_optimizer"),
        ({"zero_stage": 2, "offload_params": True}, "offload_params"),
        ({"schedule": "linear"}, "schedule"),
        ({"placement_strategy": "ANYWHERE"}, "placement_strategy"),
        ({"precision": "fp16"}, "precision"),
        ({"lr": 1e-4, "min_lr": 1e-3}, "min_lr"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": True}, "max_steps"),
        ({"beta2": 1.0}, "beta2"),
        ({"schedule": "inverse_sqrt", "warmup_steps": 0}, "warmup_steps"),
        ({"peak_flops": 0.0}, "peak_flops"),
        ({"local_mode": True, "num_workers": 2}, "local_mode .*num_workers=1"),
        ({"local_mode": True, "num_workers": 1, "use_gpu": True}, "local_mode .*use_gpu=false"),
        ({"local_mode": True, "num_workers": 1, "zero_stage": 3}, "local_mode .*zero_stage=3"),
        (
            {"local_mode": True, "num_workers": 1, "zero_stage": 1, "offload_optimizer": True},
            "local_mode .*offload_optimizer=true",
        ),
    ],
)
def test_a_bad_value_is_rejected_naming_the_key(values, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**values)


def test_the_config_round_trips_through_a_plain_mapping():
    cfg = TrainConfig(zero_stage=3, offload_params=True, num_workers=1, global_batch_size=8)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


def test_workers_start_with_the_tunables_that_keep_freed_memory_unless_turned_off(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert keeps_freed_memory(worker_runtime_env(TrainConfig())["env_vars"])
    assert worker_runtime_env(TrainConfig(keep_freed_memory=False)) == {}
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0")  # the caller's own
    tunables = worker_runtime_env(TrainConfig())["env_vars"]["GLIBC_TUNABLES"]
    assert tunables.endswith(":glibc.malloc.tcache_count=0") and keeps_freed_memory(
        {"GLIBC_TUNABLES": tunables}
    )
