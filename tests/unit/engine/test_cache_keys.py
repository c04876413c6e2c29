"""Cache keys cover exactly the config a stage reads and its inputs' keys."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.storage.artifact_store import ArtifactStore


def keys(overrides, tmp_path):
    dag = Dag(load_stages())
    plan = make_plan(dag, compose(overrides), ArtifactStore(tmp_path / "store"))
    return dag, {name: plan.stages[name].key for name in plan.order}


@pytest.mark.parametrize(
    "override, changed_stage",
    [
        ("data.filters.length.min_chars=150", "clean"),
        ("tokenizer.vocab_size=1000", "train_tokenizer"),
        ("tokenizer.shard_mb=64", "tokenize"),
        ("train.seed=3", "sample_index"),
        ("model.block_size=64", "sample_index"),
        ("train.max_steps=5", "pretrain"),
        ("train.lr=0.002", "pretrain"),
        ("model.n_layer=3", "pretrain"),
        ("eval.perplexity.stride=32", "perplexity"),
        ("eval.sample.top_p=0.5", "sample"),
        ("eval.harm.samples_per_prompt=3", "harm"),
        ("eval.report.title=card", "report"),
    ],
)
def test_changing_a_value_changes_keys_of_its_stage_and_descendants_only(
    override, changed_stage, tmp_path
):
    dag, before = keys([], tmp_path)
    _, after = keys([override], tmp_path)
    expected = {changed_stage} | dag.descendants(changed_stage)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == expected


def test_keys_are_stable_across_invocations(tmp_path):
    assert keys([], tmp_path)[1] == keys([], tmp_path)[1]


def test_cluster_and_workdir_settings_are_not_part_of_any_key(tmp_path):
    _, before = keys([], tmp_path)
    _, after = keys(["workdir=/elsewhere", "cluster.num_cpus=1"], tmp_path)
    assert before == after


def test_unknown_override_fails_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="train.lrr"):
        keys(["train.lrr=1"], tmp_path)


def test_wrong_value_type_fails_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match="train.lr"):
        keys(["train.lr=fast"], tmp_path)


def test_invalid_value_fails_before_any_stage(tmp_path):
    with pytest.raises(ConfigError, match="val_fraction"):
        keys(["data.val_fraction=1.5"], tmp_path)
