"""A stage's sizing config (the sample index's train.max_steps) stays out of its key: a committed
artifact that covers the run is reused, one that is too short is rebuilt under the same key."""

from __future__ import annotations

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.storage.artifact_store import ArtifactStore


def plan(store, *overrides):
    return make_plan(Dag(load_stages()), compose(list(overrides)), store).stages["sample_index"]


def commit_index(store, key, positions):
    tmp = store.begin("sample_index", key)
    (tmp / "order.bin").write_bytes(b"\0" * 4)
    store.commit(tmp, "sample_index", key, {"summary": {"positions": positions}})


def test_an_index_that_covers_the_run_is_reused_and_a_short_one_rebuilt(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    first = plan(store, "train.max_steps=100", "train.global_batch_size=16")
    assert first.action == "run"
    commit_index(store, first.key, positions=100 * 16)

    assert plan(store, "train.max_steps=100", "train.global_batch_size=16").action == "cached"
    fewer = plan(store, "train.max_steps=40", "train.global_batch_size=16")
    assert (fewer.key, fewer.action) == (first.key, "cached")
    more = plan(store, "train.max_steps=101", "train.global_batch_size=16")
    assert (more.key, more.action) == (first.key, "run")
    other_lr = plan(store, "train.max_steps=100", "train.global_batch_size=16", "train.lr=0.01")
    assert (other_lr.key, other_lr.action) == (first.key, "cached")


def test_the_seed_and_block_size_key_the_index_but_the_step_count_does_not(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    base = plan(store).key
    assert plan(store, "train.max_steps=7").key == base
    assert plan(store, "train.global_batch_size=32").key == base
    assert plan(store, "train.seed=1").key != base
    assert plan(store, "model.block_size=64").key != base
    assert plan(store, "train.epoch_offsets=false").key != base
