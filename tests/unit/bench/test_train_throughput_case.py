"""The tiny throughput case is the demo's own preset: model, batch and worker layout come from
`conf/preset/tiny.yaml` (so the bench cannot drift from what `make demo` trains), and
`--override` changes them as on `lmforge run`'s command line."""

from __future__ import annotations

from bench_modules import load_bench

from lmforge.model.config import ModelConfig
from lmforge.pipeline.config import compose
from lmforge.pipeline.training.precision import cpu_autocasts, cpu_bf16_unit

bench = load_bench("train_throughput")


def test_the_tiny_case_is_the_tiny_preset():
    config = compose(["preset=tiny"])
    case = bench.tiny_case([])
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
    case = bench.tiny_case(["train.global_batch_size=32", "train.micro_batch_size=16"])
    assert (case.batch, case.micro_batch) == (32, 16)
    assert bench.tiny_case(["train.unlikelihood=0.25"]).unlikelihood == 0.25
    assert case.model == bench.tiny_case([]).model


def test_each_model_name_gives_its_case():
    # bench/estimate_measures.py times training through the same cases, by name.
    assert bench.case_for("tiny", []) == bench.tiny_case([])
    base = bench.case_for("base", [])
    assert base == bench.base_case() and (base.workers, base.stage, base.batch) == (1, 0, 8)


def test_precision_pinning_and_memory_overrides_reach_lmforges_runs():
    # Until they did, `--override train.pin_cpus=false` or `train.precision=bf16` left the
    # bench's lmforge runs pinned and in fp32, and the JSON line could not tell.
    default = bench.tiny_case([])
    cfg = bench.train_config(default, 10, cpus=2)
    # the preset's bf16_if_native_except_amx, as lmforge resolves it on this CPU
    native = "bf16" if cpu_autocasts("bf16_if_native_except_amx", cpu_bf16_unit()) else "fp32"
    assert (cfg.precision, cfg.pin_cpus) == (native, True)
    fp32 = bench.train_config(bench.tiny_case(["train.precision=fp32"]), 10, cpus=2)
    assert fp32.precision == "fp32"
    assert cfg.cpus_per_worker * cfg.num_workers == 2
    changed = bench.tiny_case(["train.precision=bf16", "train.pin_cpus=false"])
    assert (changed.bf16, changed.pin_cpus) == (True, False)
    cfg = bench.train_config(changed, 10, cpus=2, compile=True)
    assert (cfg.precision, cfg.pin_cpus, cfg.compile) == ("bf16", False, True)
    assert default.keep_freed_memory and bench.train_config(default, 10, cpus=2).keep_freed_memory
    unkept = bench.tiny_case(["train.keep_freed_memory=false"])
    assert not bench.train_config(unkept, 10, cpus=2).keep_freed_memory
