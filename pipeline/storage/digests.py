"""Checksums of stored files by algorithm name; every record of one names its algorithm.

- Artifacts record `sha256` (a manifest's file entry is `{"path", "bytes", "sha256"}`, with the
  sha256 of each block too: `file_entries`): manifests are read on other nodes and by other tools.
- Checkpoint shards record `xxh3_128` (a `COMPLETE` marker's entry is `{"bytes", "xxh3_128":
  hex}`): there to catch truncated, overwritten or bit-rotted files, not forgery (the files come
  from our own ranks), and xxh3 costs a few percent of sha256's CPU time (about 7 GB/s against
  1.2 GB/s on one core here), CPU that an asynchronous save takes from training. A checkpoint's
  small JSON files, and checkpoints written before xxh3, record `sha256`; both are read.

Digests are computed over the bytes as they are written or moved where possible (`transfers`);
`digest_file` is for the few places that must read a file back (verifying before use).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

import xxhash


class Digest(Protocol):
    """A streaming digest (hashlib's and xxhash's objects both are)."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...
    def hexdigest(self) -> str: ...


SHA256, XXH3_128 = "sha256", "xxh3_128"
ARTIFACT_ALGORITHM = SHA256
"""What artifact manifests record."""
SHARD_ALGORITHM = XXH3_128
"""What checkpoint markers record for the shards (their JSON files: sha256)."""
ALGORITHMS: dict[str, Callable[[], Digest]] = {XXH3_128: xxhash.xxh3_128, SHA256: hashlib.sha256}
"""Every algorithm a record may name, in the order `recorded_digest` looks for them."""
CHUNK = 8 << 20
"""Bytes read at a time when a file is hashed from disk."""


def new_digest(algorithm: str) -> Digest:
    """A fresh streaming digest of `algorithm`; ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[algorithm]()
    except KeyError:
        raise ValueError(f"unknown checksum {algorithm!r}; known: {sorted(ALGORITHMS)}") from None


def digest_bytes(data: bytes | bytearray | memoryview, algorithm: str) -> str:
    """The hex digest of bytes in memory."""
    digest = new_digest(algorithm)
    digest.update(data)
    return digest.hexdigest()


def digest_stream(src: BinaryIO, algorithm: str) -> tuple[str, int]:
    """(hex digest, size) of a stream, read to its end in chunks."""
    digest, size = new_digest(algorithm), 0
    while block := src.read(CHUNK):
        digest.update(block)
        size += len(block)
    return digest.hexdigest(), size


def digest_file(path: str | Path, algorithm: str) -> str:
    """The hex digest of a file on disk, read back in chunks."""
    with open(path, "rb") as handle:
        return digest_stream(handle, algorithm)[0]


def record_of(data: bytes, algorithm: str) -> dict:
    """`{"bytes": n, algorithm: hex}` of bytes in memory, as a checkpoint marker lists a file."""
    return {"bytes": len(data), algorithm: digest_bytes(data, algorithm)}


def recorded_digest(record: dict) -> tuple[str, str]:
    """(algorithm, hex digest) a record names; KeyError when it names none we know."""
    for algorithm in ALGORITHMS:
        if algorithm in record:
            return algorithm, record[algorithm]
    raise KeyError(f"no checksum of {sorted(ALGORITHMS)} in {sorted(record)}")
