"""Checksums by algorithm name: sha256 for artifacts, xxh3-128 for checkpoint shards, and each
record names the algorithm it used."""

from __future__ import annotations

import io

import pytest
import xxhash

from lmforge.pipeline.storage import digests

HELLO_SHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"


def test_each_algorithm_gives_its_standard_digest_whatever_the_source(tmp_path):
    (tmp_path / "f").write_bytes(b"hello")
    assert digests.digest_bytes(b"hello", "sha256") == HELLO_SHA256
    assert digests.digest_file(tmp_path / "f", "sha256") == HELLO_SHA256
    assert digests.digest_stream(io.BytesIO(b"hello"), "sha256") == (HELLO_SHA256, 5)
    assert digests.digest_file(tmp_path / "f", "xxh3_128") == xxhash.xxh3_128(b"hello").hexdigest()


def test_a_file_larger_than_a_read_is_hashed_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(digests, "CHUNK", 3)
    (tmp_path / "f").write_bytes(b"hello")
    assert digests.digest_file(tmp_path / "f", "sha256") == HELLO_SHA256


def test_artifacts_record_sha256_and_checkpoint_shards_xxh3():
    assert digests.ARTIFACT_ALGORITHM == "sha256"
    assert digests.SHARD_ALGORITHM == "xxh3_128"


def test_a_record_names_its_algorithm_and_is_read_back_by_it():
    record = digests.record_of(b"hello", "sha256")
    assert record == {"bytes": 5, "sha256": HELLO_SHA256}
    assert digests.recorded_digest(record) == ("sha256", HELLO_SHA256)
    shard = {"bytes": 5, "xxh3_128": "ab" * 16}
    assert digests.recorded_digest(shard) == ("xxh3_128", "ab" * 16)
    with pytest.raises(KeyError, match="no checksum"):
        digests.recorded_digest({"bytes": 5, "md5": "x"})


def test_an_unknown_algorithm_is_named():
    with pytest.raises(ValueError, match="unknown checksum 'md5'"):
        digests.new_digest("md5")
