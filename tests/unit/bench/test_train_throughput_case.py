"""The tiny throughput case is the demo's own preset: model, batch and worker layout come from
`conf/preset/tiny.yaml` (so the bench cannot drift from what `make demo` trains), and
`--override` changes them as on `lmforge run`'s command line."""

from __future__ import annotations

from bench_modules import load_bench

from lmforge.model.config import ModelConfig
from lmforge.pipeline.config import compose

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
