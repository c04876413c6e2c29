"""Every stage's cache key of the shipped presets stays what it was when it was pinned, so no
user's store is invalidated by a change of code; a config key added later, at its neutral value,
changes no key.

0.3.0 changed one key on purpose: `clean`'s (version 4, paragraph dedup on by default: stores
reclean once), and with it every key downstream of `clean`. The keys of 0.1.0 still follow from
the same configs with `clean` at its version 3 and without `data.dedup.paragraph`: nothing else
moved."""

from __future__ import annotations

import dataclasses
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

FIXTURES = Path(__file__).parents[2] / "fixtures"
FIXTURE = json.loads((FIXTURES / "cache_keys_0.3.0.json").read_text())
PINNED = FIXTURE["stage_keys"]
"""The keys 0.3.0 computes for each preset, by stage."""
LINEAGE = FIXTURE["pretrain_lineage"]
"""Where 0.3.0 keeps each preset's pretrain checkpoints (`lineage_of`): a run resumes from them."""
BEFORE = json.loads((FIXTURES / "cache_keys_0.1.0.json").read_text())
"""The same as 0.1.0 computed them."""


def preset_plan(preset: str, tmp_path: Path, stages=None):
    config = compose([f"preset={preset}", f"workdir={tmp_path}"])
    return make_plan(Dag(stages or load_stages()), config, ArtifactStore(tmp_path / "store"))


def keys_and_lineage(plan) -> tuple[dict[str, str], str]:
    pretrain = plan.stages["pretrain"]
    lineage = lineage_of(
        pretrain.typed_config.model, pretrain.typed_config.train, pretrain.input_keys
    )
    return {name: plan.stages[name].key for name in plan.order}, lineage


@pytest.mark.parametrize("preset", sorted(PINNED))
def test_every_stage_key_of_the_preset_is_the_one_0_3_0_computed(preset, tmp_path):
    assert keys_and_lineage(preset_plan(preset, tmp_path)) == (PINNED[preset], LINEAGE[preset])


@pytest.mark.parametrize("preset", sorted(BEFORE["stage_keys"]))
def test_only_cleans_version_and_paragraph_dedup_moved_the_keys_since_0_1_0(preset, tmp_path):
    stages = load_stages()
    paragraph = compose([f"preset={preset}"])["data"]["dedup"]["paragraph"]
    stages["clean"] = dataclasses.replace(
        stages["clean"],
        version="3",
        unkeyed={**stages["clean"].unkeyed, "data.dedup.paragraph": paragraph},
    )
    assert keys_and_lineage(preset_plan(preset, tmp_path, stages)) == (
        BEFORE["stage_keys"][preset],
        BEFORE["pretrain_lineage"][preset],
    )
    moved = keys_and_lineage(preset_plan(preset, tmp_path))[0]
    assert all(moved[name] != BEFORE["stage_keys"][preset][name] for name in moved)


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
