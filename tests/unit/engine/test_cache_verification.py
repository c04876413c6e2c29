"""A cached artifact is reused only when its files match its manifest, and a commit reaches the
disk (every file and directory fsynced) before it is renamed into place."""

from __future__ import annotations

import logging
import os

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.storage.artifact_store import ArtifactStore


def _committed(store, stage="clean", key="abc", content=b"0123456789"):
    tmp = store.begin(stage, key)
    (tmp / "shards").mkdir()
    (tmp / "shards" / "part-0.parquet").write_bytes(content)
    return store.commit(tmp, stage, key, {})


def _age(path, seconds=3600):
    past = os.stat(path).st_mtime - seconds
    os.utime(path, (past, past))


def test_a_truncated_file_is_caught_by_its_size(tmp_path):
    store = ArtifactStore(tmp_path)
    final = _committed(store)
    (final / "shards" / "part-0.parquet").write_bytes(b"01234")
    problem = store.verify("clean", "abc")
    assert problem == "shards/part-0.parquet has 5 bytes, the manifest says 10"


def test_a_missing_file_is_named(tmp_path):
    store = ArtifactStore(tmp_path)
    final = _committed(store)
    (final / "shards" / "part-0.parquet").unlink()
    assert store.verify("clean", "abc") == "shards/part-0.parquet is missing"


def test_a_file_rewritten_after_the_manifest_is_hashed(tmp_path):
    store = ArtifactStore(tmp_path)
    final = _committed(store)
    _age(final / "manifest.json")
    (final / "shards" / "part-0.parquet").write_bytes(b"9876543210")  # same size
    assert store.verify("clean", "abc") == (
        "shards/part-0.parquet does not match its sha256 in the manifest"
    )


def test_silent_corruption_is_found_with_verify_only(tmp_path):
    store = ArtifactStore(tmp_path)
    final = _committed(store)
    shard = final / "shards" / "part-0.parquet"
    stamp = os.stat(shard)
    shard.write_bytes(b"0123456780")  # a flipped byte, timestamps as before: bit rot
    os.utime(shard, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert store.verify("clean", "abc") is None
    assert "sha256" in store.verify("clean", "abc", full=True)


def test_an_intact_artifact_passes(tmp_path):
    store = ArtifactStore(tmp_path)
    _committed(store)
    assert store.verify("clean", "abc", full=True) is None


def test_a_corrupt_cache_hit_is_recomputed_and_the_damaged_copy_kept(tmp_path, caplog):
    store = ArtifactStore(tmp_path / "store")
    dag, config = Dag(load_stages()), compose([])
    key = make_plan(dag, config, store, until="clean").stages["clean"].key
    final = _committed(store, "clean", key)
    assert make_plan(dag, config, store, until="clean").stages["clean"].action == "cached"
    (final / "shards" / "part-0.parquet").write_bytes(b"short")
    with caplog.at_level(logging.WARNING, logger="lmforge"):
        plan = make_plan(dag, config, store, until="clean")
    assert plan.stages["clean"].action == "run"
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "shards/part-0.parquet has 5 bytes" in warning[0]
    assert "recomputing" in warning[0]
    _committed(store, "clean", key)  # the recomputed artifact
    kept = list((tmp_path / "store" / "clean" / ".replaced").glob("*/shards/part-0.parquet"))
    assert [p.read_bytes() for p in kept] == [b"short"]


def test_verify_hashes_every_cached_file(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    dag, config = Dag(load_stages()), compose([])
    key = make_plan(dag, config, store, until="clean").stages["clean"].key
    final = _committed(store, "clean", key)
    shard = final / "shards" / "part-0.parquet"
    stamp = os.stat(shard)
    shard.write_bytes(b"0123456780")
    os.utime(shard, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert make_plan(dag, config, store, until="clean").stages["clean"].action == "cached"
    plan = make_plan(dag, config, store, until="clean", verify=True)
    assert plan.stages["clean"].action == "run"


def test_commit_fsyncs_every_file_and_directory_before_the_rename(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    (tmp / "shards").mkdir()
    (tmp / "shards" / "part-0.parquet").write_bytes(b"x")
    final = store.commit(tmp, "clean", "abc", {})
    rename = events.index(("replace", f"{tmp} -> {final}"))
    synced_before = {path for kind, path in events[:rename] if kind == "fsync"}
    expected = {str(tmp / p) for p in ("shards/part-0.parquet", "manifest.json", "shards", "")}
    assert {p.rstrip("/") for p in expected} <= synced_before
    assert ("fsync", str(final.parent)) in events[rename:]  # the rename itself is durable
