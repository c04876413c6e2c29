"""An artifact store in a bucket (a real moto S3 server): files go straight from their writer to
the bucket, manifest entries never reach outside the node cache, every byte read is checked
against the manifest, and cache hits are checked against the bucket's listing."""

from __future__ import annotations

import json

import pytest

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage.bucket_artifact_store import RemoteArtifactStore
from lmforge.pipeline.storage.node_cache import CacheConfig

BUCKET = "lmforge"


def make_store(tmp_path, name="cache", block_bytes=4):
    cache = CacheConfig(str(tmp_path / name), 1 << 30)
    return RemoteArtifactStore(f"s3://{BUCKET}/store", cache, block_bytes=block_bytes)


@pytest.fixture
def store(s3, tmp_path, monkeypatch):
    env, _ = s3
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return make_store(tmp_path)


def _commit(store, content=b"0123456789") -> str:
    """Commit (or rebuild) `clean/abc` with one file written by a 'task' through the output;
    the object key of that file in the bucket."""
    tmp = store.begin("clean", "abc")
    output = store.output(tmp)
    with output.open("part-0.parquet") as handle:
        handle.write(content)
    (tmp / "datasheet.md").write_text("written by the stage itself")
    store.commit(tmp, "clean", "abc", {}, [handle.entry], rebuild=True)
    prefix = store.manifest("clean", "abc")["data_prefix"]
    return f"store/clean/abc/{prefix}/part-0.parquet"


def _put_manifest(client, files):
    body = json.dumps({"files": files}).encode()
    client.put_object(Bucket=BUCKET, Key="store/clean/abc/manifest.json", Body=body)


@pytest.mark.parametrize("entry", ["../../outside.txt", "/tmp/outside.txt", "a/../../x", "a//b"])
def test_a_manifest_entry_outside_the_artifact_is_refused(store, s3, tmp_path, entry):
    _, client = s3
    client.put_object(Bucket=BUCKET, Key="store/outside.txt", Body=b"pwned")
    _put_manifest(client, [{"path": entry, "bytes": 5, "sha256": "0" * 64}])
    with pytest.raises(ArtifactError, match="outside its artifact directory") as caught:
        store.materialize("clean", "abc")
    assert "s3://lmforge/store/clean/abc" in str(caught.value) and repr(entry) in str(caught.value)
    assert not [p for p in tmp_path.rglob("outside.txt")]


def test_the_manifest_names_every_file_with_the_writers_checksums(store, s3):
    _, client = s3
    key = _commit(store)
    manifest = store.manifest("clean", "abc")
    by_path = {f["path"]: f for f in manifest["files"]}
    assert set(by_path) == {"part-0.parquet", "datasheet.md"}
    assert by_path["part-0.parquet"]["blocks"]["bytes"] == 4  # 10 bytes: 3 blocks of 4
    assert len(by_path["part-0.parquet"]["blocks"]["sha256"]) == 3
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"0123456789"


def test_a_file_corrupted_in_the_bucket_is_named_and_nothing_of_it_is_kept(store, s3, tmp_path):
    _, client = s3
    key = _commit(store)
    client.put_object(Bucket=BUCKET, Key=key, Body=b"0123456780")
    fresh = make_store(tmp_path, "fresh-node-cache")
    part = fresh.open_input("clean", "abc") / "part-0.parquet"
    assert part.read_range(0, 8) == b"01234567"  # blocks 0 and 1 are intact
    for _ in range(2):  # the bad block is never taken as fetched
        with pytest.raises(ArtifactError) as caught:
            part.read_bytes()
        message = str(caught.value)
        assert "s3://lmforge/store/clean/abc/part-0.parquet" in message
        assert "block 2 of 3" in message and "lmforge rerun clean" in message


def test_an_intact_artifact_downloads(store, tmp_path):
    _commit(store)
    local = make_store(tmp_path, "fresh-node-cache").materialize("clean", "abc")
    assert (local / "part-0.parquet").read_bytes() == b"0123456789"
    assert (local / "datasheet.md").read_text() == "written by the stage itself"


def test_cache_hits_are_checked_against_the_bucket(store, s3):
    _, client = s3
    key = _commit(store)
    assert store.verify("clean", "abc", full=True) is None
    client.put_object(Bucket=BUCKET, Key=key, Body=b"0123456780")
    assert store.verify("clean", "abc") is None  # same size: only --verify reads the bytes
    assert store.verify("clean", "abc", full=True) == (
        "part-0.parquet does not match its sha256 in the manifest"
    )
    client.put_object(Bucket=BUCKET, Key=key, Body=b"01")
    assert store.verify("clean", "abc") == "part-0.parquet has 2 bytes, the manifest says 10"
    client.delete_object(Bucket=BUCKET, Key=key)
    assert store.verify("clean", "abc") == "part-0.parquet is missing"


def test_a_rerun_writes_beside_the_committed_files_and_keeps_the_old_manifest(store, s3):
    _, client = s3
    first = _commit(store, b"first run")
    first_manifest = store.manifest("clean", "abc")
    tmp = store.begin("clean", "abc")
    with store.output(tmp).open("part-0.parquet") as handle:
        handle.write(b"second run!")
    assert store.manifest("clean", "abc") == first_manifest  # untouched until the commit
    assert client.get_object(Bucket=BUCKET, Key=first)["Body"].read() == b"first run"
    store.commit(tmp, "clean", "abc", {}, [handle.entry], rebuild=True)
    assert (store.open_input("clean", "abc") / "part-0.parquet").read_bytes() == b"second run!"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="store/clean/.replaced/")["Contents"]
    kept = json.loads(client.get_object(Bucket=BUCKET, Key=listed[0]["Key"])["Body"].read())
    assert kept["data_uri"] == f"s3://lmforge/{first.rsplit('/', 1)[0]}"


def test_a_commit_of_a_key_committed_meanwhile_keeps_the_first_manifest(store, s3):
    _, client = s3
    _commit(store, b"first run")
    first_manifest = store.manifest("clean", "abc")
    tmp = store.begin("clean", "abc")
    with store.output(tmp).open("part-0.parquet") as handle:
        handle.write(b"late run")
    store.commit(tmp, "clean", "abc", {}, [handle.entry])
    assert store.manifest("clean", "abc") == first_manifest
    assert not tmp.exists()
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix="store/clean/.replaced/")
    assert "Contents" not in listed, "nothing set aside: nothing was replaced"


def test_a_file_a_task_reported_but_never_wrote_fails_the_commit(store):
    tmp = store.begin("clean", "abc")
    lost = {"path": "lost.parquet", "bytes": 3, "sha256": "0" * 64}
    with pytest.raises(ArtifactError, match="lost.parquet is missing"):
        store.commit(tmp, "clean", "abc", {}, [lost])
    assert store.manifest("clean", "abc") is None


def test_a_newer_version_of_a_cached_file_replaces_the_old_copy(store, tmp_path):
    _commit(store, b"first run")
    reader = make_store(tmp_path, "reader-cache")
    assert (reader.open_input("clean", "abc") / "part-0.parquet").read_bytes() == b"first run"
    _commit(store, b"second run")
    assert (reader.open_input("clean", "abc") / "part-0.parquet").read_bytes() == b"second run"
