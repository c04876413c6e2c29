"""CPU seconds of a whole process tree, read from /proc (Linux), for benchmarks that count every
process: a driver, the Ray runtime it started (GCS, raylet, dashboard, log monitor) and every
worker the raylet forked.

A live process's own time is `utime + stime` of /proc/PID/stat; a child that exited and was
reaped by a waiting parent adds its time (and its reaped descendants') to that parent's `cutime +
cstime`. So the tree's total is the sum of all four fields over its live processes. A Ray worker
that exits during the measurement is not counted: the raylet ignores SIGCHLD, so the kernel reaps
its workers without adding their time to any parent's. `TreeCpu` suits work whose workers outlive
it (the `clean` stage's do: over a 30 MB stage it read 30.78 CPU-s where a cgroup holding the bench
read 30.80); `suite_time.py` counts a cgroup instead, as its runs start and end runtimes. Take the
difference of two readings (`TreeCpu.seconds`).
"""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()  # fields from 3 (state) on; the name may hold ')'


def all_stats() -> dict[int, list[str]]:
    """Pid -> /proc stat fields (from the state on) of every process of the machine."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            found[int(entry.name)] = fields
    return found


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, over every process of the machine."""
    tree: dict[int, list[int]] = {}
    for pid, fields in all_stats().items():
        tree.setdefault(int(fields[1]), []).append(pid)
    return tree


def session_stats(sid: int) -> dict[int, list[str]]:
    """Pid -> /proc stat fields (from the state on) of every process of session `sid`, zombies
    included."""
    return {pid: fields for pid, fields in all_stats().items() if int(fields[3]) == sid}


def tree_pids(root: int) -> list[int]:
    """`root` and all its live descendants."""
    children = _children()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, ()))
    return pids


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by `root` (default: this process), its live
    descendants and the descendants they reaped."""
    total = 0
    for pid in tree_pids(root or os.getpid()):
        fields = _stat_fields(pid)
        if fields:  # utime, stime, cutime, cstime are fields 14-17 of /proc/PID/stat
            total += sum(int(x) for x in fields[11:15])
    return total / TICK


class TreeCpu:
    """CPU seconds of this process's tree since the reading was taken."""

    def __init__(self, root: int | None = None) -> None:
        self.root = root or os.getpid()
        self.start = tree_cpu_seconds(self.root)

    @property
    def seconds(self) -> float:
        return tree_cpu_seconds(self.root) - self.start
