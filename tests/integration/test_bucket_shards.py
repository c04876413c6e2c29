"""Sharded checkpoints in a bucket of a real S3-compatible server (moto) on 127.0.0.1: a big shard
goes up in parts, each rank downloads only the shards holding its ranges into a directory of its
own (two ranks on one node never touch each other's files), checked against the marker."""

from __future__ import annotations

import shutil
import threading

import pytest
import torch
from sharded_checkpoints import SHAPES, full_tensors, save_sharded

from lmforge.pipeline.training.checkpoint import bucket as remote
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.resume import choose_checkpoint
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, Layout, shard_names
from lmforge.pipeline.training.checkpoint.store import CheckpointStore, rank_staging

pytestmark = pytest.mark.integration

ROOT = "s3://lmforge/checkpoints/pretrain/sharded"


@pytest.fixture
def bucket(s3_in_env):
    yield s3_in_env
    shutil.rmtree(remote.local_staging(ROOT), ignore_errors=True)


def test_a_big_shard_is_uploaded_in_parts(bucket):
    store = CheckpointStore(ROOT)
    pending = store.begin(1)
    body = memoryview(bytes(24 << 20))
    store.write_file(pending, "model-00000-of-00001.safetensors", b"", body)
    head = bucket.head_object(
        Bucket="lmforge",
        Key="checkpoints/pretrain/sharded/step_000001/model-00000-of-00001.safetensors",
    )
    assert head["ContentLength"] == 24 << 20
    assert "-" in head["ETag"], "a multipart upload's ETag ends in -<parts>"


def test_two_ranks_on_one_node_fetch_only_their_shards_each_into_its_own_directory(bucket):
    location = save_sharded(CheckpointStore(ROOT), 4, world=2)
    w_numel = torch.Size(SHAPES["w"]).numel()  # 35: rank 0 holds 0..17, rank 1 18..34
    halves = {0: {"w": (0, 18), "b": (0, 4)}, 1: {"w": (18, w_numel - 18), "b": (4, 3)}}
    stores = {rank: CheckpointStore(ROOT) for rank in halves}
    fetched, errors = {}, []

    def fetch(rank):
        try:
            layout_dir, problem = stores[rank].fetch(location, [LAYOUT_FILE], rank)
            assert problem is None
            files = sorted(Layout.of(layout_dir).files_for(halves[rank], optimizer=True))
            directory, problem = stores[rank].fetch(location, files, rank)
            assert problem is None
            fetched[rank] = directory
        except Exception as exc:  # reported below, from the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=fetch, args=(rank,)) for rank in halves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert fetched[0] != fetched[1] and fetched[0].parent.parent == rank_staging(ROOT, 0).parent
    for rank, directory in fetched.items():
        shards = {p.name for p in directory.iterdir() if p.name.endswith(".safetensors")}
        assert shards == set(shard_names(rank, 2)), f"rank {rank} fetched only its own shards"
    stores[0].release(0)
    assert not rank_staging(ROOT, 0).exists()
    assert set(shard_names(1, 2)) <= {p.name for p in fetched[1].iterdir()}, "rank 1's stay"
    read = Layout.of(fetched[1]).reader(fetched[1])
    expected = full_tensors(4)["exp_avg/w"].reshape(-1)[18:]
    assert torch.equal(read("exp_avg/w", 18, w_numel - 18), expected)


def test_a_shard_corrupted_in_the_bucket_is_found_on_download_and_named(bucket):
    save_sharded(CheckpointStore(ROOT), 4, world=2)
    save_sharded(CheckpointStore(ROOT), 8, world=2)
    key = "checkpoints/pretrain/sharded/step_000008/" + shard_names(1, 2)[0]
    body = bytearray(bucket.get_object(Bucket="lmforge", Key=key)["Body"].read())
    body[-1] ^= 0xFF
    bucket.put_object(Bucket="lmforge", Key=key, Body=bytes(body))
    everything = {name: (0, torch.Size(shape).numel()) for name, shape in SHAPES.items()}
    with pytest.warns(UserWarning, match=r"step_000008: corrupt: model-00001-of-00002"):
        chosen = choose_checkpoint(ROOT, 0, 1, everything)
    assert chosen.path == f"{ROOT}/step_000004" and chosen.state.step == 4
    assert (chosen.directory / ckpt.STATE_FILE).is_file()
