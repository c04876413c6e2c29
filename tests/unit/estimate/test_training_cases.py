"""The tiny training case (the `pretrain` calibration's and bench/train_throughput.py's) is the
demo's own preset: model, batch and worker layout come from `conf/preset/tiny.yaml` (so neither
can drift from what `make demo` trains), and `--override` changes them as on `lmforge run`'s
command line."""

from __future__ import annotations

from lmforge.model.config import ModelConfig
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.estimate.calibration.training_steps import (
    base_case,
    case_for,
    tiny_case,
    train_config,
)
from lmforge.pipeline.training.precision import cpu_autocasts, cpu_bf16_unit


def test_the_tiny_case_is_the_tiny_preset():
    config = compose(["preset=tiny"])
    case = tiny_case([])
    expected = ModelConfig.from_dict(
        {**config["model"], "vocab_size": config["tokenizer"]["vocab_size"]}
    )
    assert case.model == expected
    train = config["train"]
    assert (case.batch, case.micro_batch) == (train["global_batch_size"], train["micro_batch_size"])
    assert (case.workers, case.stage) == (train["num_workers"], train["zero_stage"])
    assert case.unlikelihood == train["unlikelihood"]  # both loops train the preset's objective
    assert case.stage >= 1 and case.workers >= 2  # the demo keeps the distributed path


def test_an_override_changes_the_case_as_it_would_change_the_preset():
    case = tiny_case(["train.global_batch_size=32", "train.micro_batch_size=16"])
    assert (case.batch, case.micro_batch) == (32, 16)
    assert tiny_case(["train.unlikelihood=0.25"]).unlikelihood == 0.25
    assert case.model == tiny_case([]).model


def test_each_model_name_gives_its_case():
    # the `pretrain` calibration case times training through the same cases, by name.
    assert case_for("tiny", []) == tiny_case([])
    base = case_for("base", [])
    assert base == base_case() and (base.workers, base.stage, base.batch) == (1, 0, 8)


def test_precision_pinning_and_memory_overrides_reach_lmforges_runs():
    # Until they did, `--override train.pin_cpus=false` or `train.precision=bf16` left the
    # bench's lmforge runs pinned and in fp32, and the JSON line could not tell.
    default = tiny_case([])
    cfg = train_config(default, 10, cpus=2)
    # the preset's bf16_if_native_except_amx, as lmforge resolves it on this CPU
    native = "bf16" if cpu_autocasts("bf16_if_native_except_amx", cpu_bf16_unit()) else "fp32"
    assert (cfg.precision, cfg.pin_cpus) == (native, True)
    fp32 = train_config(tiny_case(["train.precision=fp32"]), 10, cpus=2)
    assert fp32.precision == "fp32"
    assert cfg.cpus_per_worker * cfg.num_workers == 2
    changed = tiny_case(["train.precision=bf16", "train.pin_cpus=false"])
    assert (changed.bf16, changed.pin_cpus) == (True, False)
    cfg = train_config(changed, 10, cpus=2, compile=True)
    assert (cfg.precision, cfg.pin_cpus, cfg.compile) == ("bf16", False, True)
    assert default.keep_freed_memory and train_config(default, 10, cpus=2).keep_freed_memory
    unkept = tiny_case(["train.keep_freed_memory=false"])
    assert not train_config(unkept, 10, cpus=2).keep_freed_memory
