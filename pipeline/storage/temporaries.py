"""Temporary directories of running stages: who owns them, and sweeping only the dead ones' work.

`claim(tmp)` writes `OWNER_FILE` into a fresh temporary directory: the host, the kernel's boot id,
and the pid and start time (from /proc/PID/stat, so a reused pid is not mistaken for the owner)
of the process writing into it. `sweep(dirs)` removes a directory only when its owner is dead:

- owner on this host (same host name and boot id): removed when that process no longer runs;
- owner on another host: left alone until it is `FOREIGN_MAX_AGE_S` old (that host may still be
  working; a shared store path is seen from many nodes);
- no owner record (an older lmforge, or a process killed between creating the directory and
  writing the record): removed once it is `UNCLAIMED_MAX_AGE_S` old.

A directory holding `RESUMABLE_MARKER` is never swept: it holds finished task outputs that a later
run of the same stage and key resumes from; that stage removes it once its artifact is committed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.storage.integrity import MANIFEST

OWNER_FILE = ".lmforge-owner.json"
RESUMABLE_MARKER = ".lmforge-resumable"
ENGINE_FILES = (MANIFEST, OWNER_FILE, RESUMABLE_MARKER)
"""Files of a temporary directory that are the engine's, never part of the artifact."""
FOREIGN_MAX_AGE_S = 7 * 24 * 3600.0
UNCLAIMED_MAX_AGE_S = 3600.0


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks after boot (field 22 of /proc/PID/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    return int(stat.rsplit(")", 1)[1].split()[19])


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def current_owner() -> dict[str, Any]:
    """The record that identifies this process among all processes of all hosts."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot_id": boot_id(),
        "pid": pid,
        "start_ticks": process_start_ticks(pid),
    }


def claim(tmp: Path) -> None:
    """Record this process as the owner of the temporary directory `tmp`."""
    write_atomic(tmp / OWNER_FILE, json.dumps(current_owner()))


def release(tmp: Path) -> None:
    """Drop the owner record before `tmp` becomes a committed artifact."""
    (tmp / OWNER_FILE).unlink(missing_ok=True)


def owner_alive(owner: dict[str, Any]) -> bool | None:
    """True or False for an owner on this host (this boot); None when it lives elsewhere."""
    if owner.get("host") != socket.gethostname() or owner.get("boot_id") != boot_id():
        return None
    ticks = process_start_ticks(int(owner["pid"]))
    return ticks is not None and ticks == owner.get("start_ticks")


def held_by_live_owner(tmp: Path) -> bool:
    """Whether a process that may still run (here, or on another host) owns `tmp`."""
    try:
        owner = json.loads((tmp / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(owner, dict) or "pid" not in owner:
        return False
    return owner_alive(owner) is not False


def is_abandoned(tmp: Path, now: float | None = None) -> bool:
    """Whether `tmp` is the work of a dead process that no later run will resume from."""
    if (tmp / RESUMABLE_MARKER).exists():
        return False
    now = time.time() if now is None else now
    try:
        owner = json.loads((tmp / OWNER_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return now - _last_change(tmp) >= UNCLAIMED_MAX_AGE_S
    except (OSError, ValueError):
        owner = {}
    alive = owner_alive(owner) if isinstance(owner, dict) and "pid" in owner else None
    if alive is None:
        return now - _last_change(tmp) >= FOREIGN_MAX_AGE_S
    return not alive


def sweep(candidates: Iterable[Path]) -> int:
    """Remove the abandoned temporary directories among `candidates`; returns how many."""
    removed = 0
    for tmp in candidates:
        try:
            abandoned = tmp.is_dir() and is_abandoned(tmp)
        except OSError:  # it vanished meanwhile: committed or removed by its owner
            continue
        if abandoned:
            shutil.rmtree(tmp, ignore_errors=True)
            removed += 1
    return removed


def _last_change(tmp: Path) -> float:
    times = [tmp.stat().st_mtime]
    owner = tmp / OWNER_FILE
    if owner.exists():
        times.append(owner.stat().st_mtime)
    return max(times)
