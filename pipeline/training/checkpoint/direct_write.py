"""Writing a checkpoint shard from page-aligned memory straight to the disk (O_DIRECT).

A buffered write copies every byte into the page cache first (about a CPU-second per GB here,
page allocation included), CPU that an asynchronous save takes from training on a busy host;
with O_DIRECT the kernel moves the staging region's pages to the disk itself. The file's head
(the safetensors header, padded to `ALIGN`) goes out through a small aligned buffer, the body
from the region in large aligned pieces, and the last partial block padded with zeros, after
which the file is cut back to its size. Where the file system refuses O_DIRECT (tmpfs, some
network file systems) the same bytes are written buffered. Either way the checksum is computed
over the bytes as they go out (nothing is read back) and the file is fsynced before it counts.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Callable

import numpy as np

from lmforge.pipeline.storage.digests import new_digest

ALIGN = 4096
"""File offsets, lengths and memory addresses of O_DIRECT writes are multiples of this."""
CHUNK = 64 << 20
"""Bytes per write (and hash update) of the body."""


def address(view: memoryview) -> int:
    """Memory address of the first byte of a buffer."""
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data) if len(view) else 0


def write_file(
    path: str | os.PathLike,
    head: bytes,
    body: memoryview,
    algorithm: str,
    *,
    midway: Callable[[], None] | None = None,
    split_at: int = 0,
) -> tuple[int, str]:
    """Write `head` then `body` as the file at `path`, fsynced; (bytes, hex digest).

    midway: called once `split_at` bytes of the body are written (fault drills; such a write
    goes through the page cache).
    """
    body = body.cast("B")
    aligned = len(head) % ALIGN == 0 and address(body) % ALIGN == 0
    if midway is None and aligned and hasattr(os, "O_DIRECT"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
        else:
            try:
                return _direct(fd, head, body, algorithm)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
            finally:
                os.close(fd)
    return _buffered(path, head, body, algorithm, midway, split_at)


def _direct(fd: int, head: bytes, body: memoryview, algorithm: str) -> tuple[int, str]:
    digest = new_digest(algorithm)
    bounce = mmap.mmap(-1, len(head) or ALIGN)
    try:
        bounce[: len(head)] = head
        digest.update(head)
        _write_all(fd, memoryview(bounce)[: len(head)])
    finally:
        bounce.close()
    whole = len(body) - len(body) % ALIGN
    for start in range(0, whole, CHUNK):
        piece = body[start : min(start + CHUNK, whole)]
        digest.update(piece)
        _write_all(fd, piece)
    if whole < len(body):
        tail = body[whole:]
        digest.update(tail)
        block = mmap.mmap(-1, ALIGN)
        try:
            block[: len(tail)] = tail
            _write_all(fd, memoryview(block))
        finally:
            block.close()
        os.ftruncate(fd, len(head) + len(body))
    os.fsync(fd)
    return len(head) + len(body), digest.hexdigest()


def _buffered(path, head, body, algorithm, midway, split_at) -> tuple[int, str]:
    digest = new_digest(algorithm)
    with open(path, "wb") as out:
        digest.update(head)
        out.write(head)
        for start, stop in _pieces(len(body), split_at if midway is not None else 0):
            if midway is not None and start == split_at:
                midway()
            piece = body[start:stop]
            digest.update(piece)
            out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    return len(head) + len(body), digest.hexdigest()


def _pieces(size: int, split_at: int) -> list[tuple[int, int]]:
    """[start, stop) pieces of CHUNK bytes at most, one of them starting at split_at."""
    bounds = sorted({0, *range(CHUNK, size, CHUNK), *([split_at] if 0 < split_at < size else [])})
    return [(start, stop) for start, stop in zip(bounds, [*bounds[1:], size], strict=True)]


def _write_all(fd: int, view: memoryview) -> None:
    while len(view):
        done = os.write(fd, view)
        view = view[done:]
