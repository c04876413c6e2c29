"""The DAG: the declared stages, their order, and cycle detection."""

from __future__ import annotations

import pytest

from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.stage import StageSpec
from lmforge.pipeline.errors import ConfigError


def test_the_pipeline_has_the_designed_stages_in_topological_order():
    dag = Dag(load_stages())
    order = dag.order
    assert set(order) >= {
        "clean",
        "train_tokenizer",
        "tokenize",
        "sample_index",
        "pretrain",
        "perplexity",
        "sample",
        "harm",
        "report",
    }
    for name in order:
        for upstream in dag.stages[name].inputs:
            assert order.index(upstream) < order.index(name)
    assert dag.descendants("pretrain") == {"perplexity", "sample", "harm", "report"}
    assert dag.upto("tokenize") == ["clean", "train_tokenizer", "tokenize"]
    assert dag.upto("sample_index") == ["clean", "train_tokenizer", "tokenize", "sample_index"]
    assert "sample_index" in dag.stages["pretrain"].inputs


def _spec(name, inputs):
    return StageSpec(name, lambda ctx: {}, inputs, (), lambda s: s, "1")


def test_a_cycle_is_rejected_naming_it():
    with pytest.raises(ConfigError, match="cycle"):
        Dag({"a": _spec("a", ("b",)), "b": _spec("b", ("a",))})


def test_an_unknown_stage_name_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="stages are: clean"):
        Dag(load_stages()).descendants("pretrian")
