"""Moving bytes between the local disk and a store: one copy loop, with progress.

`copy_stream` (from a stream) and `copy_buffer` (from memory) are how every upload and download
of lmforge moves its bytes (an artifact's files, checkpoint shards and whole checkpoints, scratch
files between tasks): in large chunks, hashed on the way when the caller keeps a digest, counted
in a `TransferProgress`, which logs bytes done, rate and time left every few seconds (small
transfers stay quiet). Ranged reads of the node cache count theirs in one too (`node_cache`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import BinaryIO, Protocol

from lmforge.pipeline.quantities import format_duration

log = logging.getLogger("lmforge")

COPY_CHUNK = 8 << 20
"""Bytes read and written at a time."""


class Writable(Protocol):
    def write(self, data: bytes | memoryview, /) -> object: ...


class Hasher(Protocol):
    def update(self, data: bytes | memoryview, /) -> object: ...


LOUD_BYTES = 64 << 20
"""Transfers smaller than this log nothing."""
EVERY_S = 5.0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


class TransferProgress:
    """Counts bytes moved (from any thread) and logs `what: done of total, rate, ETA`."""

    def __init__(
        self, what: str, total_bytes: int, *, every_s: float | None = None, loud: int | None = None
    ) -> None:
        """every_s: seconds between lines (`EVERY_S`); loud: the smallest transfer that logs
        (`LOUD_BYTES`)."""
        self.what, self.total = what, total_bytes
        self.done = 0
        self.every_s = EVERY_S if every_s is None else every_s
        self.quiet = total_bytes < (LOUD_BYTES if loud is None else loud)
        self.started = time.monotonic()
        self._last = self.started
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        with self._lock:
            self.done += nbytes
            now = time.monotonic()
            if self.quiet or now - self._last < self.every_s:
                return
            self._last = now
        log.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max(1e-9, (now or time.monotonic()) - self.started)
        rate = self.done / elapsed
        share = self.done / self.total if self.total else 1.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        left = format_duration(eta) if eta != float("inf") else "?"
        return (
            f"{self.what}: {_size(self.done)} of {_size(self.total)} ({share:.0%}), "
            f"{_size(rate)}/s, ETA {left}"
        )

    def finish(self) -> None:
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            log.info(
                "%s: %s in %s (%s/s)",
                self.what,
                _size(self.done),
                format_duration(elapsed),
                _size(self.done / max(elapsed, 1e-9)),
            )


def copy_stream(
    src: BinaryIO,
    dst: Writable,
    progress: TransferProgress | None = None,
    digest: Hasher | None = None,
) -> int:
    """Copy `src` to its end into `dst`, updating `digest` and `progress` on the way; the bytes
    copied."""
    copied = 0
    while block := src.read(COPY_CHUNK):
        dst.write(block)
        if digest is not None:
            digest.update(block)
        if progress is not None:
            progress.add(len(block))
        copied += len(block)
    return copied


def copy_buffer(
    data: bytes | bytearray | memoryview,
    dst: Writable,
    progress: TransferProgress | None = None,
    digest: Hasher | None = None,
) -> int:
    """Write bytes in memory into `dst` (in chunks, without copying them), updating `digest` and
    `progress` on the way; the bytes written."""
    view = memoryview(data).cast("B")
    for start in range(0, len(view), COPY_CHUNK):
        piece = view[start : start + COPY_CHUNK]
        dst.write(piece)
        if digest is not None:
            digest.update(piece)
        if progress is not None:
            progress.add(len(piece))
    return len(view)
