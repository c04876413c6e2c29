"""The CPU seconds of a command by kind of process: which processes the suite's CPU goes to (Ray
Train's ranks and controller, Ray's daemons, stage workers, the CLI), across every test.

    .venv/bin/python tests/cpu_by_process.py [--json FILE] [--top 40] -- make test

Runs the command and reads /proc every `--interval` seconds (0.2 by default). Every process that
starts after it counts, whoever its parent (`ray start` daemonises its raylet), under its most
specific title: a Ray actor's or task's (`ray::RayTrainWorker`, `ray::stage:clean`) before
`ray::IDLE`, before its command line. Its CPU is its utime + stime at the last reading, so a
process's last `--interval` and a process that lives less than one are missed: the figures are a
lower bound (the suite: within about 3% of `tests/cpu_by_test.py`'s cgroup total).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench_modules import load_bench

cpu_accounting = load_bench("cpu_accounting")
PROC = Path("/proc")
XDIST_WORKER = "import sys;exec(eval(sys.stdin.readline()))"
"""How execnet starts a pytest-xdist worker: `python -c` with this code."""


def kind_of(cmdline: list[str]) -> str:
    """What a process is, from its command line (argv, as /proc/PID/cmdline holds it)."""
    if len(cmdline) == 1 and " " in cmdline[0]:  # a title written over argv: its words
        cmdline = cmdline[0].split()
    if not cmdline:
        return "?"
    if cmdline[0].startswith("ray::"):  # a Ray worker's title: ray::Actor.method or ray::task
        title = cmdline[0].split(" ", 1)[0]
        actor, dot, _ = title.partition(".")
        return actor if dot and actor[5:6].isupper() else title
    exe = os.path.basename(cmdline[0])
    if not exe.startswith("python"):
        return exe
    args = cmdline[1:]
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
        args = args[1:]
    if not args:
        return "python"
    if args[0] == "-m" and len(args) > 1:
        return f"python -m {args[1]}"
    if args[0] == "-c":
        code = " ".join(args[1:2])
        return "pytest worker" if code == XDIST_WORKER else "python -c"
    return f"python {os.path.basename(args[0])}"


def specificity(kind: str) -> int:
    """Which title a process keeps: a Ray actor's or task's, then an idle Ray worker's, then any."""
    if kind.startswith("ray::"):
        return 1 if kind == "ray::IDLE" else 2
    return 0


@dataclass(slots=True)
class Seen:
    kind: str
    cpu_ticks: int


def _cpu_ticks() -> dict[tuple[int, str], int]:
    """(pid, start time) -> utime + stime of each live process but kernel threads
    (`bench/cpu_accounting.py`'s reading of /proc)."""
    return {
        (pid, fields[19]): int(fields[11]) + int(fields[12])
        for pid, fields in cpu_accounting.all_stats().items()
        if fields[1] != "2" and pid != 2  # kthreadd and its children
    }


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part] or None


class Poller:
    """The processes that started after it, each with its kind and CPU ticks so far."""

    def __init__(self) -> None:
        self.before = set(_cpu_ticks())
        self.seen: dict[tuple[int, str], Seen] = {}

    def sample(self) -> None:
        for key, ticks in _cpu_ticks().items():
            if key in self.before:
                continue
            entry = self.seen.get(key)
            if entry is not None and entry.cpu_ticks == ticks:
                continue
            cmdline = _cmdline(key[0])
            kind = kind_of(cmdline) if cmdline else "?"
            if entry is None:
                self.seen[key] = Seen(kind, ticks)
                continue
            entry.cpu_ticks = ticks
            if cmdline and specificity(kind) >= specificity(entry.kind):
                entry.kind = kind

    def by_kind(self) -> list[dict]:
        return by_kind(self.seen.values(), cpu_accounting.TICK)


def by_kind(seen, ticks_per_s: int) -> list[dict]:
    """Per kind of process: how many, their CPU seconds, most first."""
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for entry in seen:
        cpu[entry.kind] += entry.cpu_ticks / ticks_per_s
        count[entry.kind] += 1
    return [
        {"kind": kind, "processes": count[kind], "cpu_s": round(seconds, 1)}
        for kind, seconds in cpu.most_common()
    ]


def table(rows: list[dict], wall_s: float, top: int) -> str:
    total = sum(r["cpu_s"] for r in rows)
    lines = [
        f"{sum(r['processes'] for r in rows)} processes, {total:.0f} CPU-s in {wall_s:.0f} s",
        "| process | count | CPU-s | each | share |",
        "|---|---|---|---|---|",
    ]
    for r in rows[:top]:
        each = r["cpu_s"] / r["processes"]
        share = r["cpu_s"] / total if total else 0.0
        lines.append(
            f"| `{r['kind']}` | {r['processes']} | {r['cpu_s']:.0f} | {each:.2f} | {share:.0%} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="a command's CPU seconds by kind of process")
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    poller = Poller()
    started = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        poller.sample()
        time.sleep(args.interval)
    poller.sample()
    wall_s = time.monotonic() - started
    rows = poller.by_kind()
    if args.json:
        args.json.write_text(json.dumps({"wall_s": round(wall_s, 1), "rows": rows}) + "\n")
    print(table(rows, wall_s, args.top), file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
