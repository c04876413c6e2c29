"""An artifact store in a bucket (a real moto S3 server): manifest entries never reach outside
the local cache, every download is checked against size and sha256, and cache hits are checked
against the bucket's listing."""

from __future__ import annotations

import json

import pytest

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.remote_store import RemoteArtifactStore

BUCKET = "lmforge"


@pytest.fixture
def store(s3, tmp_path, monkeypatch):
    env, _ = s3
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return RemoteArtifactStore(f"s3://{BUCKET}/store", tmp_path / "cache")


def _commit(store, content=b"0123456789"):
    tmp = store.begin("clean", "abc")
    (tmp / "part-0.parquet").write_bytes(content)
    store.commit(tmp, "clean", "abc", {})


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
    assert not (tmp_path / "cache" / "clean" / "abc").exists()


def test_a_file_corrupted_in_the_bucket_is_named_and_nothing_is_cached(store, s3, tmp_path):
    _, client = s3
    _commit(store)
    client.put_object(Bucket=BUCKET, Key="store/clean/abc/part-0.parquet", Body=b"0123456780")
    store.cache_dir = tmp_path / "fresh-node-cache"
    with pytest.raises(ArtifactError, match="part-0.parquet does not match its sha256"):
        store.materialize("clean", "abc")
    assert not (store.cache_dir / "clean" / "abc").exists()
    assert not list((store.cache_dir / ".staging").iterdir())


def test_an_intact_artifact_downloads(store, tmp_path):
    _commit(store)
    store.cache_dir = tmp_path / "fresh-node-cache"
    local = store.materialize("clean", "abc")
    assert (local / "part-0.parquet").read_bytes() == b"0123456789"


def test_cache_hits_are_checked_against_the_bucket(store, s3):
    _, client = s3
    _commit(store)
    assert store.verify("clean", "abc", full=True) is None
    client.put_object(Bucket=BUCKET, Key="store/clean/abc/part-0.parquet", Body=b"0123456780")
    assert store.verify("clean", "abc") is None  # same size: only --verify reads the bytes
    assert store.verify("clean", "abc", full=True) == (
        "part-0.parquet does not match its sha256 in the manifest"
    )
    client.put_object(Bucket=BUCKET, Key="store/clean/abc/part-0.parquet", Body=b"01")
    assert store.verify("clean", "abc") == "part-0.parquet has 2 bytes, the manifest says 10"
    client.delete_object(Bucket=BUCKET, Key="store/clean/abc/part-0.parquet")
    assert store.verify("clean", "abc") == "part-0.parquet is missing"


def test_a_damaged_local_copy_is_downloaded_again(store):
    _commit(store)
    local = store.local_path("clean", "abc")
    (local / "part-0.parquet").write_bytes(b"012")
    assert (store.materialize("clean", "abc") / "part-0.parquet").read_bytes() == b"0123456789"
    assert list((store.cache_dir / ".corrupt").glob("*/part-0.parquet"))
