"""Progress of a large upload or download: bytes done, rate and time left, logged every few
seconds (small transfers stay quiet)."""

from __future__ import annotations

import logging
import threading
import time

from lmforge.pipeline.quantities import format_duration

log = logging.getLogger("lmforge")

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
        self, what: str, total_bytes: int, *, every_s: float = EVERY_S, loud: int = LOUD_BYTES
    ) -> None:
        self.what, self.total = what, total_bytes
        self.done = 0
        self.every_s = every_s
        self.quiet = total_bytes < loud
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
