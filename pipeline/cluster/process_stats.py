"""What this process has read and its peak memory, from /proc (Linux); None elsewhere.

Used to report what a coordinator itself costs (`clean` reports the bytes it read: the
tasks, not the coordinator, should read the corpus) and by the scale benchmarks.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path


def bytes_read(pid: int | str = "self") -> int | None:
    """`rchar` of /proc/PID/io: bytes this process asked read() and pread() for, cache or disk."""
    return _field(Path(f"/proc/{pid}/io"), "rchar:", 1)


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """`VmHWM` of /proc/PID/status: the peak resident set size."""
    return _field(Path(f"/proc/{pid}/status"), "VmHWM:", 1024)


def rss_bytes(pid: int | str = "self") -> int | None:
    """`VmRSS` of /proc/PID/status: the resident set size now."""
    return _field(Path(f"/proc/{pid}/status"), "VmRSS:", 1024)


def _field(path: Path, name: str, unit: int) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) * unit
    except OSError:
        return None
    return None


def release_freed_memory() -> None:
    """Hand memory freed by earlier work back to the OS: Arrow's allocator (mimalloc) and glibc
    keep freed pages resident, so a reused Ray worker's RSS still holds its last task's data.

    No `gc.collect()`: a task's data is freed by reference counting, and a full collection
    costs about 0.1 s per million live objects, on every task start, in a process that holds
    many (one dedup test, whose steps reset the peak once per band and key range in the test's
    process, took 24.7 s instead of 1.2 s beside 3 million live objects)."""
    if "pyarrow" in sys.modules:  # never imported just for this
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's `mallopt` parameters: free heap top kept before trimming; the size from which malloc
maps memory of its own."""
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20
"""Where glibc's dynamic threshold ends up once a large block has been freed (64-bit)."""


KEPT_FREE_BYTES = 1 << 30
"""Free heap top a training process keeps mapped (`keep_freed_memory`)."""


def kept_memory_tunables(environ: Mapping[str, str]) -> str:
    """`GLIBC_TUNABLES` that start a process keeping the memory it frees (`keep_freed_memory`):
    one arena, blocks up to the mmap ceiling from the heap, and `KEPT_FREE_BYTES` of free heap
    kept mapped. The arena count only works from the start: a thread takes its arena at its first
    allocation. Tunables `environ` already sets come after ours, so they win."""
    ours = (
        f"glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold={GLIBC_MMAP_THRESHOLD_MAX}:"
        f"glibc.malloc.trim_threshold={KEPT_FREE_BYTES}"
    )
    theirs = environ.get("GLIBC_TUNABLES", "")
    return f"{ours}:{theirs}" if theirs else ours


def keeps_freed_memory(environ: Mapping[str, str]) -> bool:
    """Whether a process started with `environ` has `kept_memory_tunables` in effect."""
    return environ.get("GLIBC_TUNABLES", "").startswith(kept_memory_tunables({}))


def keep_freed_memory(kept_free: int = KEPT_FREE_BYTES) -> bool:
    """Set the thresholds of `kept_memory_tunables` again (a ZeRO-3 build sets its own for its
    work); False without glibc.

    A training step frees its activations and the next one allocates them again. Under glibc's
    defaults the freed memory goes back to the kernel and the next step takes a page fault for
    every page of it: the main heap's free top beyond the trim threshold, and every heap of a
    thread's own arena once it is wholly free, whatever the threshold (Ray Train runs the loop in
    a thread). Kept, the pages stay mapped. The peak does not move (the same blocks are live at
    it); the memory between steps stays near it. The tiny preset's two workers took 12-33k
    minor faults a second each under the defaults and 6-7k kept, and their steps were about 4%
    shorter (docs/benchmarks.md)."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD_MAX)) and bool(
        mallopt(M_TRIM_THRESHOLD, kept_free)
    )


@contextlib.contextmanager
def large_allocations_mapped(threshold: int = 1 << 20) -> Iterator[None]:
    """Give allocations of `threshold` bytes or more mappings of their own while the block runs.

    Memory that lives briefly beside memory that stays (full-size parameters dropped as their
    partitions are kept) otherwise fragments glibc's heap: the freed blocks stay resident and
    count in the peak. Mapped blocks go back to the OS when freed. Setting the threshold ends
    glibc's own adjustment of it, so afterwards both thresholds are left where that adjustment
    ends once a large block has been freed (mmap at the ceiling, trim at twice it).
    A no-op without glibc.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        yield
        return
    mallopt(M_MMAP_THRESHOLD, threshold)
    try:
        yield
    finally:
        mallopt(M_MMAP_THRESHOLD, GLIBC_MMAP_THRESHOLD_MAX)
        mallopt(M_TRIM_THRESHOLD, 2 * GLIBC_MMAP_THRESHOLD_MAX)


def reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current RSS (`5` to /proc/self/clear_refs), so a reused
    worker's earlier peaks do not count against the next task; False where unsupported. What
    earlier tasks freed is released first, so it does not count either."""
    global _task_start_rss
    release_freed_memory()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    _task_start_rss = rss_bytes() or 0
    return True


_task_start_rss = 0


def task_peak_rss_bytes() -> int:
    """The peak RSS since the last `reset_peak_rss` (0 where /proc is missing)."""
    return peak_rss_bytes() or 0


def task_rss_stats() -> dict[str, int]:
    """A task's memory for its result: `peak_rss_bytes` since the last `reset_peak_rss` and
    `start_rss_bytes`, the RSS then (what a reused worker still held from earlier tasks)."""
    return {"peak_rss_bytes": task_peak_rss_bytes(), "start_rss_bytes": _task_start_rss}
