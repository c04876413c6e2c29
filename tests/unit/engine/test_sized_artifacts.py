"""A stage's sizing config (the sample index's train.max_steps) stays out of its key: a committed
artifact that covers the run is reused, one that is too short is rebuilt under the same key, and
a stage that reads it meanwhile keeps reading the copy it opened."""

from __future__ import annotations

import json

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


def _build(store, key, epochs, rebuild=False):
    """Commit a real sample index of `epochs` epochs of 1000 windows under `key`."""
    from lmforge.pipeline.training.data.sample_index import build_sample_index

    tmp = store.begin("sample_index", key)
    header = build_sample_index(
        tmp, n_windows=1000, seed=7, max_offset=0, epochs=epochs, block_size=8,
        data_fingerprint="f",
    )  # fmt: skip
    positions = header["epochs"] * header["n_windows"]
    store.commit(tmp, "sample_index", key, {"summary": {"positions": positions}}, rebuild=rebuild)


def test_a_reader_keeps_the_index_it_opened_while_a_rebuild_grows_it_under_the_same_key(tmp_path):
    """The reader (pretrain's ranks) opened the index before a run that needs more windows
    rebuilt it: every file it reads, then or later, is of the copy it opened."""
    from lmforge.pipeline.training.data.sample_index import HEADER, SampleIndex

    builder, reader = ArtifactStore(tmp_path / "store"), ArtifactStore(tmp_path / "store")
    _build(builder, "k", epochs=1)
    opened = reader.open_input("sample_index", "k")
    header = (opened / HEADER).read_bytes()  # one file read before the rebuild, one after
    _build(builder, "k", epochs=3, rebuild=True)

    old, new = SampleIndex(opened), SampleIndex(builder.path("sample_index", "k"))
    assert (opened / HEADER).read_bytes() == header
    assert (old.positions, new.positions) == (1000, 3000)
    assert (old.windows(0, 1000) == new.windows(0, 1000)).all(), "grown, the same at the start"
    assert reader.manifest("sample_index", "k")["summary"]["positions"] == 3000
    assert json.loads((opened / "manifest.json").read_text())["summary"]["positions"] == 1000
    assert len(list((tmp_path / "store" / "sample_index" / ".replaced").iterdir())) == 1
    reader.release_inputs()
    assert not opened.exists() and not list((tmp_path / "store").rglob(".tmp-read-*"))
    assert old.windows(0, 2).tolist() == new.windows(0, 2).tolist(), "an open map stays valid"


def test_an_input_is_opened_across_the_moment_a_rebuild_swaps_the_copies(tmp_path):
    """Between the two renames of a rebuild's commit the key has no directory: a reader opening
    it then waits for the new one instead of failing."""
    import os
    import threading

    store = ArtifactStore(tmp_path / "store")
    _build(store, "k", epochs=1)
    final = store.path("sample_index", "k")
    aside = final.with_name("aside")
    os.rename(final, aside)
    threading.Timer(0.2, os.rename, (aside, final)).start()
    opened = store.open_input("sample_index", "k")
    assert json.loads((opened / "manifest.json").read_text())["summary"]["positions"] == 1000
    store.release_inputs()


def test_the_pinned_inputs_of_a_dead_reader_are_swept(tmp_path):
    from dead_driver import dead_driver

    from lmforge.pipeline.storage.temporaries import OWNER_FILE

    store = ArtifactStore(tmp_path / "store")
    _build(store, "k", epochs=1)
    live, dead = store.open_input("sample_index", "k"), store.open_input("sample_index", "k")
    (dead.parent / OWNER_FILE).write_text(json.dumps(dead_driver()))
    assert ArtifactStore(tmp_path / "store").sweep_temporaries() == 1
    assert live.exists() and not dead.parent.exists()
