"""A bucket input used like a directory: path questions are answered from the manifest, and
only what is read is fetched (bytes counted by the S3 server)."""

from __future__ import annotations

import numpy as np
import pytest
from counting_s3 import reset, served

from lmforge.pipeline.storage.bucket_artifact_store import RemoteArtifactStore
from lmforge.pipeline.storage.node_cache import CacheConfig

BUCKET = "lmforge"
BLOCK = 4096


@pytest.fixture
def artifact(s3_env, tmp_path):
    """`tokenize/k` committed with two shards' files and a summary; its InputPath on a fresh
    node cache."""
    env, _ = s3_env
    cache = CacheConfig(str(tmp_path / "w"), 1 << 30)
    writer = RemoteArtifactStore(f"s3://{BUCKET}/inputs", cache, block_bytes=BLOCK)
    tmp = writer.begin("tokenize", "k")
    output = writer.output(tmp)
    entries = []
    for index in range(2):
        with output.open(f"val-{index:05d}.tokens.bin") as handle:
            handle.write(np.arange(10_000, dtype="<u2").tobytes())
        entries.append(handle.entry)
    (tmp / "stats").mkdir()
    (tmp / "stats" / "summary.json").write_text('{"tokens": 20000}')
    writer.commit(tmp, "tokenize", "k", {}, entries)
    reader = RemoteArtifactStore(f"s3://{BUCKET}/inputs", CacheConfig(str(tmp_path / "r"), 1 << 30))
    reset(env)
    return reader.open_input("tokenize", "k")


def _served(env) -> int:
    return sum(n for key, n in served(env).items() if "/inputs/tokenize/k/a" in key)


def test_path_questions_fetch_nothing(artifact, s3_env):
    assert sorted(p.name for p in artifact.glob("val-*.tokens.bin")) == [
        "val-00000.tokens.bin",
        "val-00001.tokens.bin",
    ]
    assert (artifact / "stats").is_dir() and (artifact / "stats" / "summary.json").is_file()
    assert not (artifact / "nothing.json").exists()
    assert (artifact / "val-00001.tokens.bin").stat().st_size == 20_000
    assert [p.name for p in artifact.iterdir()] == [
        "stats",
        *[f"val-0000{i}.tokens.bin" for i in (0, 1)],
    ]
    assert not hasattr(artifact, "read")  # a probe, not a read
    assert _served(s3_env[0]) == 0


def test_a_slice_of_a_token_stream_fetches_its_block(artifact, s3_env):
    tokens = (artifact / "val-00001.tokens.bin").memmap(np.uint16, 10_000)  # 5 blocks
    assert tokens[100:110].tolist() == list(range(100, 110))
    assert _served(s3_env[0]) == BLOCK
    assert tokens[2100:2200].tolist() == list(range(2100, 2200))  # bytes 4200-4400: block 1
    assert _served(s3_env[0]) == 2 * BLOCK
    assert (artifact / "stats" / "summary.json").read_text() == '{"tokens": 20000}'


def test_a_directory_used_as_a_local_path_is_fetched_whole(artifact, s3_env):
    local = artifact.local_path()
    assert sorted(p.name for p in local.iterdir()) == [
        "stats",
        "val-00000.tokens.bin",
        "val-00001.tokens.bin",
    ]
    assert _served(s3_env[0]) == 40_000 + len('{"tokens": 20000}')
