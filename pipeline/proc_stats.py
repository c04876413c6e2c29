"""What this process has read and its peak memory, from /proc (Linux); None elsewhere.

Used to report what a coordinator itself costs (`clean` reports the bytes it read: the
tasks, not the coordinator, should read the corpus) and by the scale benchmarks.
"""

from __future__ import annotations

from pathlib import Path


def bytes_read(pid: int | str = "self") -> int | None:
    """`rchar` of /proc/PID/io: bytes this process asked read() and pread() for, cache or disk."""
    return _field(Path(f"/proc/{pid}/io"), "rchar:", 1)


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """`VmHWM` of /proc/PID/status: the peak resident set size."""
    return _field(Path(f"/proc/{pid}/status"), "VmHWM:", 1024)


def _field(path: Path, name: str, unit: int) -> int | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) * unit
    except OSError:
        return None
    return None
