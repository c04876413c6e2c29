"""Where an eval stage runs its model: on actors (the stage's task reserves no CPU) or in the
stage's own process (`in_process`: the task reserves the CPUs an actor would)."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.evaluation.model_pool import ModelPoolConfig

EVAL_STAGES = ("perplexity", "sample", "harm")


@pytest.mark.parametrize("name", EVAL_STAGES)
def test_a_stage_reserves_cpus_only_when_it_runs_the_model_itself(name):
    spec = load_stages()[name]
    section = {"eval.perplexity": "perplexity", "eval.sample": "sample", "eval.harm": "harm"}
    (path,) = spec.config_sections
    assert section[path] == name

    def cpus(*overrides: str) -> float:
        config = compose(["preset=base", *overrides])
        return spec.cpus_of(spec.parse_config({path: config["eval"][name]}))

    assert cpus() == 0  # the actors hold the CPUs
    assert cpus(f"eval.{name}.in_process=true") == 1
    assert cpus(f"eval.{name}.in_process=true", f"eval.{name}.threads_per_actor=2") == 2


def test_the_tiny_preset_runs_every_eval_model_in_process():
    config = compose(["preset=tiny"])
    assert all(config["eval"][name]["in_process"] for name in EVAL_STAGES)
    assert not any(compose(["preset=base"])["eval"][name]["in_process"] for name in EVAL_STAGES)


def test_in_process_on_a_gpu_is_refused_with_the_settings_to_change():
    with pytest.raises(ValueError, match="in_process runs the model on the stage's own CPUs"):
        ModelPoolConfig(in_process=True, device="cuda")
    assert ModelPoolConfig(in_process=True, device="auto").in_process
