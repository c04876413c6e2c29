"""What a manifest says of one file, computed from the bytes as they pass: size, sha256, and the
sha256 of every block, so a reader that fetches part of a file can verify that part alone.

A manifest entry is `{"path", "bytes", "sha256"}`, plus `"blocks": {"bytes": B, "sha256": [...]}`
when the file is larger than one block of B bytes (block i covers bytes [i*B, (i+1)*B)). A file
of one block, or an entry written before blocks were recorded, is verified as a whole by its
sha256.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmforge.pipeline.storage.digests import ARTIFACT_ALGORITHM, CHUNK, new_digest

DEFAULT_BLOCK_BYTES = 4 << 20
"""4 MiB: a ranged read fetches and verifies whole blocks; a manifest holds 64 hex digits per
block (16 KB per GB of artifact)."""


class FileDigest:
    """The size, sha256 and per-block sha256 of a byte stream fed through `update`."""

    def __init__(self, block_bytes: int = DEFAULT_BLOCK_BYTES) -> None:
        if block_bytes < 1:
            raise ValueError(f"block size must be >= 1 byte, got {block_bytes}")
        self.block_bytes = block_bytes
        self.size = 0
        self._whole = new_digest(ARTIFACT_ALGORITHM)
        self._block = new_digest(ARTIFACT_ALGORITHM)
        self._in_block = 0
        self._blocks: list[str] = []

    def update(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        self._whole.update(view)
        self.size += len(view)
        while len(view):
            take = min(len(view), self.block_bytes - self._in_block)
            self._block.update(view[:take])
            self._in_block += take
            view = view[take:]
            if self._in_block == self.block_bytes:
                self._blocks.append(self._block.hexdigest())
                self._block, self._in_block = new_digest(ARTIFACT_ALGORITHM), 0

    def entry(self, rel: str) -> dict[str, Any]:
        """The manifest entry of the file at `rel` (relative POSIX path in its artifact)."""
        record: dict[str, Any] = {
            "path": rel,
            "bytes": self.size,
            "sha256": self._whole.hexdigest(),
        }
        blocks = self._blocks + ([self._block.hexdigest()] if self._in_block else [])
        if len(blocks) > 1:
            record["blocks"] = {"bytes": self.block_bytes, "sha256": blocks}
        return record


def describe_file(path: Path, rel: str, block_bytes: int = DEFAULT_BLOCK_BYTES) -> dict[str, Any]:
    """The manifest entry of a file already on disk (reads it once)."""
    digest = FileDigest(block_bytes)
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.entry(rel)


def block_layout(entry: dict[str, Any]) -> tuple[int, list[str]]:
    """(block size, block sha256s) of a manifest entry; one block for the whole file when it
    records none."""
    blocks = entry.get("blocks")
    if isinstance(blocks, dict) and isinstance(blocks.get("sha256"), list):
        size = blocks.get("bytes")
        if isinstance(size, int) and size > 0:
            expected = -(-entry["bytes"] // size)
            if len(blocks["sha256"]) == expected:
                return size, [str(h) for h in blocks["sha256"]]
    return max(1, entry["bytes"]), [entry["sha256"]]
