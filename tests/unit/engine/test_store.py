"""The artifact store commits atomically and never overwrites a cached result silently."""

from __future__ import annotations

import json

from lmforge.pipeline.storage.artifact_store import MANIFEST, ArtifactStore


def test_commit_writes_manifest_with_file_hashes_and_renames_into_place(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    (tmp / "a.txt").write_text("hello")
    assert not store.exists("clean", "abc")
    final = store.commit(tmp, "clean", "abc", {"summary": {"n": 1}})
    manifest = json.loads((final / MANIFEST).read_text())
    assert store.exists("clean", "abc") and not tmp.exists()
    assert manifest["files"] == [
        {
            "path": "a.txt",
            "bytes": 5,
            "sha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        }
    ]


def test_a_directory_without_manifest_does_not_exist(tmp_path):
    store = ArtifactStore(tmp_path)
    (tmp_path / "clean" / "abc").mkdir(parents=True)
    (tmp_path / "clean" / "abc" / "half.parquet").write_text("partial")
    assert not store.exists("clean", "abc")


def test_recommitting_a_key_keeps_the_previous_artifact(tmp_path):
    store = ArtifactStore(tmp_path)
    first = store.begin("clean", "abc")
    (first / "v").write_text("1")
    store.commit(first, "clean", "abc", {})
    second = store.begin("clean", "abc")
    (second / "v").write_text("2")
    final = store.commit(second, "clean", "abc", {}, rebuild=True)
    assert (final / "v").read_text() == "2"
    kept = list((tmp_path / "clean" / ".replaced").glob("abc-*/v"))
    assert [p.read_text() for p in kept] == ["1"]


def test_a_commit_of_a_key_committed_meanwhile_keeps_the_first_and_moves_nothing(tmp_path):
    store = ArtifactStore(tmp_path)
    first = store.begin("clean", "abc")
    (first / "v").write_text("1")
    store.commit(first, "clean", "abc", {})
    second = store.begin("clean", "abc")
    (second / "v").write_text("2")
    final = store.commit(second, "clean", "abc", {})
    assert (final / "v").read_text() == "1", "the artifact others may be reading stays"
    assert not second.exists(), "the late attempt's files are dropped"
    assert not (tmp_path / "clean" / ".replaced").exists()


def test_a_commit_over_a_damaged_copy_replaces_it_without_a_rebuild_flag(tmp_path):
    store = ArtifactStore(tmp_path)
    first = store.begin("clean", "abc")
    (first / "v").write_text("1")
    store.commit(first, "clean", "abc", {})
    (tmp_path / "clean" / "abc" / "v").write_text("damaged")
    second = store.begin("clean", "abc")
    (second / "v").write_text("2")
    assert (store.commit(second, "clean", "abc", {}) / "v").read_text() == "2"
    assert len(list((tmp_path / "clean" / ".replaced").glob("abc-*/v"))) == 1
