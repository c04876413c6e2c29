"""Every stage's cache key of the shipped presets stays what 0.1.0 computed, so no user's store
is invalidated by a change of code; a config key added later, at its neutral value, changes no
key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.keys import cache_key, without_unkeyed
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.engine.stage import stage, unregister_stage
from lmforge.pipeline.stages.pretrain.stage import lineage_of
from lmforge.pipeline.storage.artifact_store import ArtifactStore

FIXTURE = json.loads((Path(__file__).parents[2] / "fixtures" / "cache_keys_0.1.0.json").read_text())
PINNED = FIXTURE["stage_keys"]
"""The keys 0.1.0 computed for each preset, by stage."""
LINEAGE = FIXTURE["pretrain_lineage"]
"""Where 0.1.0 kept each preset's pretrain checkpoints (`lineage_of`): a run resumes from them."""


def preset_plan(preset: str, tmp_path: Path):
    config = compose([f"preset={preset}", f"workdir={tmp_path}"])
    return make_plan(Dag(load_stages()), config, ArtifactStore(tmp_path / "store"))


@pytest.mark.parametrize("preset", sorted(PINNED))
def test_every_stage_key_of_the_preset_is_the_one_0_1_0_computed(preset, tmp_path):
    plan = preset_plan(preset, tmp_path)
    assert {name: plan.stages[name].key for name in plan.order} == PINNED[preset]
    pretrain = plan.stages["pretrain"]
    lineage = lineage_of(
        pretrain.typed_config.model, pretrain.typed_config.train, pretrain.input_keys
    )
    assert lineage == LINEAGE[preset]


def test_a_key_at_its_neutral_value_is_left_out_and_any_other_value_counts():
    sections = {"train": {"lr": 0.1, "later": 0}, "eval.sample": {"top_p": 0.9}}
    unkeyed = {"train.later": 0, "eval.sample": {"top_p": 0.9}}
    assert without_unkeyed(sections, unkeyed) == {"train": {"lr": 0.1}}
    assert sections["train"] == {"lr": 0.1, "later": 0}, "the caller's config is not changed"
    moved = {"train": {"lr": 0.1, "later": 5}, "eval.sample": {"top_p": 0.9}}
    assert without_unkeyed(moved, unkeyed) == {"train": {"lr": 0.1, "later": 5}}


def test_a_stage_that_gains_a_key_keeps_its_key_at_the_neutral_value(tmp_path):
    """A stage declared with `unkeyed` plans the key it had before the key existed."""
    before = cache_key("probe_stage", "1", {"train": {"lr": 0.1}}, {})

    @stage(name="probe_stage", config=("train",), unkeyed={"train.later": 0})
    def probe_stage(ctx):
        return {}

    try:
        dag = Dag({"probe_stage": load_stages()["probe_stage"]})
        store = ArtifactStore(tmp_path / "store")
        neutral = make_plan(dag, {"train": {"lr": 0.1, "later": 0}}, store)
        moved = make_plan(dag, {"train": {"lr": 0.1, "later": 2}}, store)
    finally:
        unregister_stage("probe_stage")
    assert neutral.stages["probe_stage"].key == before
    assert moved.stages["probe_stage"].key != before
