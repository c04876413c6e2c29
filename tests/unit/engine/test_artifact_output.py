"""Files written through `ctx.output` land in the store with their manifest entries computed on
the way (a big file as a multipart upload), a failed writer leaves nothing, and the commit of an
artifact so written reads none of its data again (`rchar` of /proc/self/io)."""

from __future__ import annotations

import os

import pytest

from lmforge.pipeline.cluster.process_stats import bytes_read
from lmforge.pipeline.storage.artifact_store import ArtifactStore
from lmforge.pipeline.storage.bucket_artifact_store import RemoteArtifactStore
from lmforge.pipeline.storage.file_entries import describe_file
from lmforge.pipeline.storage.node_cache import CacheConfig

BUCKET = "lmforge"
MB = 1 << 20


@pytest.fixture
def bucket(s3_env):
    return s3_env[1]


def write_in_pieces(output, rel: str, n_mb: int) -> dict:
    with output.open(rel) as handle:
        for i in range(n_mb):
            handle.write(bytes([i % 256]) * MB)
    return handle.entry


def test_the_writer_computes_the_entry_that_reading_the_file_gives(tmp_path):
    store = ArtifactStore(tmp_path / "store", block_bytes=MB)
    tmp = store.begin("tokenize", "k")
    entry = write_in_pieces(store.output(tmp), "train-00000.tokens.bin", 3)
    assert entry == describe_file(tmp / "train-00000.tokens.bin", entry["path"], MB)
    assert len(entry["blocks"]["sha256"]) == 3


def test_a_big_file_goes_up_as_a_multipart_upload(bucket, tmp_path):
    store = RemoteArtifactStore(f"s3://{BUCKET}/multipart", CacheConfig(str(tmp_path), 1 << 30))
    tmp = store.begin("tokenize", "k")
    output = store.output(tmp)
    entry = write_in_pieces(output, "big.bin", 25)
    key = output.location("big.bin").removeprefix(f"s3://{BUCKET}/")
    etag = bucket.head_object(Bucket=BUCKET, Key=key)["ETag"].strip('"')
    assert int(etag.rsplit("-", 1)[1]) >= 2  # parts of a multipart upload
    assert bucket.head_object(Bucket=BUCKET, Key=key)["ContentLength"] == entry["bytes"]


def test_a_writer_that_fails_leaves_nothing(bucket, tmp_path):
    local = ArtifactStore(tmp_path / "store")
    remote = RemoteArtifactStore(f"s3://{BUCKET}/failed", CacheConfig(str(tmp_path), 1 << 30))
    for store in (local, remote):
        output = store.output(store.begin("clean", "k"))
        with pytest.raises(RuntimeError), output.open("half.parquet") as handle:
            handle.write(b"half of it")
            raise RuntimeError("the task died")
    assert [p.name for p in (tmp_path / "store" / "clean" / ".tmp-k").iterdir()] == [
        ".lmforge-owner.json"
    ]
    listed = bucket.list_objects_v2(Bucket=BUCKET, Prefix="failed/").get("Contents", [])
    assert all(o["Key"].endswith("/") for o in listed)  # pyarrow's empty directory markers


@pytest.mark.parametrize("where", ["local", "bucket"])
def test_the_commit_reads_none_of_the_data_its_writers_described(bucket, tmp_path, where):
    if where == "local":
        store = ArtifactStore(tmp_path / "store")
    else:
        store = RemoteArtifactStore(f"s3://{BUCKET}/rchar", CacheConfig(str(tmp_path), 1 << 30))
    tmp = store.begin("tokenize", "k")
    entries = [write_in_pieces(store.output(tmp), f"train-{i}.bin", 8) for i in range(2)]
    (tmp / "summary.json").write_text("{}")  # a small file of the stage's own, hashed here
    before = bytes_read()
    store.commit(tmp, "tokenize", "k", {"summary": {}}, entries)
    read = bytes_read() - before
    assert read < 256 << 10, f"the commit read {read} bytes of a 16 MB artifact"
    assert {f["path"] for f in store.manifest("tokenize", "k")["files"]} == {
        "train-0.bin",
        "train-1.bin",
        "summary.json",
    }
    assert os.path.basename(str(store.path("tokenize", "k"))) == "k"
