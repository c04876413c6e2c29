"""The node-local cache of a bucket (a real moto S3 server counting what it serves): a ranged
read fetches and verifies only the blocks it touches, the cache stays under its limit by
evicting the least recently used files that no process holds, and processes reading one file at
once download it once."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from counting_s3 import reset, served

from lmforge.pipeline.errors import ArtifactError
from lmforge.pipeline.storage.cached_reads import open_object
from lmforge.pipeline.storage.file_entries import FileDigest, block_layout
from lmforge.pipeline.storage.node_cache import CacheConfig, CacheFull, NodeCache, RemoteFile

BUCKET = "lmforge"
BLOCK = 4096  # the filesystem's block: a sparse copy holds whole ones


@pytest.fixture
def bucket(s3_env):
    reset(s3_env[0])
    return s3_env


def put(client, key: str, data: bytes, block: int = BLOCK) -> RemoteFile:
    """Upload `data` as `key`; the RemoteFile a manifest entry of it describes."""
    client.put_object(Bucket=BUCKET, Key=key, Body=data)
    digest = FileDigest(block)
    digest.update(data)
    entry = digest.entry(key)
    block_bytes, hashes = block_layout(entry)
    return RemoteFile(
        uri=f"s3://{BUCKET}/{key}",
        name=key,
        size=len(data),
        sha256=entry["sha256"],
        block_bytes=block_bytes,
        block_sha256=tuple(hashes),
        label=f"s3://{BUCKET}/{key}",
    )


def payload(n_bytes: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(n_bytes))


def test_a_ranged_read_fetches_and_verifies_only_the_blocks_it_touches(bucket, tmp_path):
    env, client = bucket
    data = payload(10 * BLOCK)
    remote = put(client, "ranged/ten-blocks", data)
    cache = NodeCache(CacheConfig(str(tmp_path), 1 << 20))
    held = cache.open(remote)
    assert held.read(2 * BLOCK + 100, 50) == data[2 * BLOCK + 100 : 2 * BLOCK + 150]
    assert served(env)[f"{BUCKET}/ranged/ten-blocks"] == BLOCK
    assert held.read(2 * BLOCK, BLOCK) == data[2 * BLOCK : 3 * BLOCK]  # already here
    assert served(env)[f"{BUCKET}/ranged/ten-blocks"] == BLOCK
    assert cache.usage() == BLOCK  # a sparse copy: the other blocks take no disk
    assert held.local_path().read_bytes() == data


def test_a_corrupt_block_is_named_and_never_taken_as_fetched(bucket, tmp_path):
    _, client = bucket
    data = payload(4 * BLOCK)
    remote = put(client, "corrupt/four-blocks", data)
    client.put_object(Bucket=BUCKET, Key="corrupt/four-blocks", Body=data[:-1] + b"\0")
    held = NodeCache(CacheConfig(str(tmp_path), 1 << 20)).open(remote)
    assert held.read(0, BLOCK) == data[:BLOCK]  # an intact block reads
    for _ in range(2):
        with pytest.raises(ArtifactError, match=r"four-blocks does not match .*block 3 of 4"):
            held.read(3 * BLOCK, 10)


def test_the_cache_keeps_under_its_limit_evicting_files_nobody_holds(bucket, tmp_path):
    _, client = bucket
    files = [put(client, f"lru/file-{i}", payload(4096, seed=i), 4096) for i in range(4)]
    cache = NodeCache(CacheConfig(str(tmp_path), 3 * 4096))
    held = cache.open(files[0])
    held.local_path()  # in use until closed: never evicted
    for remote in files[1:]:
        reader = cache.open(remote)
        reader.local_path()
        reader.close()
        assert cache.usage() <= 3 * 4096
    assert held.local_path().read_bytes() == payload(4096, seed=0)
    kept = {p.name for p in (tmp_path / "files" / "lru").iterdir()}
    assert kept == {"file-0", "file-2", "file-3"}  # file-1, least recently used, went


def test_a_fetch_that_only_files_in_use_leave_no_room_for_fails_naming_the_limit(bucket, tmp_path):
    _, client = bucket
    cache = NodeCache(CacheConfig(str(tmp_path), 2 * 4096))
    held = [cache.open(put(client, f"full/file-{i}", payload(4096, i), 4096)) for i in range(3)]
    held[0].local_path()
    held[1].local_path()
    with pytest.raises(CacheFull, match="raise cluster.cache.max_gb"):
        held[2].local_path()


READER = """
import json, sys
from lmforge.pipeline.storage.node_cache import CacheConfig, NodeCache, RemoteFile
remote = RemoteFile(**json.loads(sys.argv[1]))
data = NodeCache(CacheConfig(sys.argv[2], 1 << 30)).open(remote).local_path().read_bytes()
print(len(data), flush=True)
"""


def test_processes_reading_one_file_at_once_download_it_once(bucket, tmp_path):
    env, client = bucket
    data = payload(64 * BLOCK)
    remote = put(client, "shared/sixty-four-blocks", data)
    spec = json.dumps(dataclasses.asdict(remote))
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, spec, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        for _ in range(4)
    ]
    assert [r.communicate(timeout=120)[0].strip() for r in readers] == [str(len(data))] * 4
    assert served(env)[f"{BUCKET}/shared/sixty-four-blocks"] == len(data)
    assert (tmp_path / "files" / "shared" / "sixty-four-blocks").read_bytes() == data


def test_an_object_outside_any_artifact_is_read_through_the_cache_once(bucket, tmp_path):
    env, client = bucket
    data = payload(3 * BLOCK)
    client.put_object(Bucket=BUCKET, Key="checkpoints/step_000010/shard-0", Body=data)
    uri = f"s3://{BUCKET}/checkpoints/step_000010/shard-0"
    config = CacheConfig(str(tmp_path), 1 << 20)
    for _ in range(2):  # the second reader finds it cached
        held = open_object(uri, config)
        assert held.local_path().read_bytes() == data
        held.close()
    assert served(env)[f"{BUCKET}/checkpoints/step_000010/shard-0"] == len(data)


def test_a_copy_another_process_started_while_this_one_waited_is_the_one_it_fills(bucket, tmp_path):
    """Opening a cached file opens its data path before taking the file's lock; if another
    process starts the copy meanwhile (a new inode), the blocks this one fetches must land in
    the file the cache names, not in the inode it opened first."""
    _, client = bucket
    data = payload(3 * BLOCK)
    remote = put(client, "race/three-blocks", data)
    cache = NodeCache(CacheConfig(str(tmp_path), 1 << 20))
    have = cache.state / f"{remote.name}.have"
    have.parent.mkdir(parents=True, exist_ok=True)
    other = os.open(have, os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)  # the other process holds the lock ...
    opened: dict = {}
    thread = threading.Thread(target=lambda: opened.update(held=cache.open(remote)))
    thread.start()
    named = cache.files / remote.name
    deadline = time.monotonic() + 10
    while not named.exists() and time.monotonic() < deadline:  # ... once this one has opened
        time.sleep(0.01)
    time.sleep(0.2)
    named.unlink()  # ... and starts the copy: a new inode, the header naming the content
    fd = os.open(named, os.O_RDWR | os.O_CREAT)
    os.ftruncate(fd, remote.size)
    os.close(fd)
    os.pwrite(other, remote.identity() + bytes(remote.blocks), 0)
    fcntl.flock(other, fcntl.LOCK_UN)
    os.close(other)
    thread.join(timeout=10)
    held = opened["held"]
    assert held.read(0, len(data)) == data
    assert named.read_bytes() == data  # what a reader of the local path gets
    held.close()


def test_a_reader_holding_the_sparse_copy_reads_a_file_another_process_adopted(bucket, tmp_path):
    """`adopt` moves a whole file in (a new inode) and marks every block present: a process that
    opened the sparse copy before must read the adopted file, not zeros from the old inode."""
    _, client = bucket
    data = payload(3 * BLOCK, seed=5)
    remote = put(client, "race/adopted", data)
    cache = NodeCache(CacheConfig(str(tmp_path), 1 << 20))
    reader = cache.open(remote)  # opened first: holds the sparse file, nothing fetched
    writer = cache.open(remote)  # the process that just wrote this content
    local = tmp_path / "written"
    local.write_bytes(data)
    writer.adopt(local)
    writer.close()
    reset(bucket[0])
    assert reader.read(BLOCK, 2 * BLOCK) == data[BLOCK:]
    assert reader.read(0, len(data)) == data
    assert served(bucket[0]) == {}  # nothing downloaded: the adopted blocks were used
    reader.close()
