"""`make test` here and at a reference checkout, one after the other on one machine: the suite's
wall time and the CPU seconds of every process it started.

    .venv/bin/python bench/suite_time.py --reference ../lmforge-0.1.0

The reference is a checkout of another version with its `.venv` built (`make demo` or `make
test` run there once). Each side's bootstrap is brought up to date first, untimed (`make
--bootstrap`, the Makefile's stamp of the test tools): only `make test` with everything in place
is timed. The reference runs first, then this checkout.

CPU seconds count every process each suite started, Ray's included: each side runs in a cgroup
of its own (cgroup v1's `cpuacct`, or v2's `cpu.stat`), which every process it starts joins
whatever it does (Ray's raylet ignores SIGCHLD, so its workers' CPU never reaches any parent's
rusage). Where no cgroup can be made (not root, no delegation), the processes of the suite's
session are sampled every 0.2 s instead (`cpu_scope` says which): a process that lives less than
that is missed. The bench does not make itself the child subreaper to count orphans through
their rusage: Ray's processes learn that their parent died by being reparented to init, so
under a subreaper a killed driver's runtime lives on and the tests of killed drivers fail. After
`make test` exits, the bench waits (at most `--settle` seconds) for what it left running to
end.

Keys: `lmforge` and `reference`, minutes of `make test`; `ratio` (lmforge / reference; the
redesign's goal: at most 0.7, and at most 12 minutes); `passed`, `failed` and
`reference_passed`, `reference_failed`; `cpu_s` and `reference_cpu_s`, CPU seconds of every
process of each suite; `busy`, the share of the machine's CPUs each suite kept busy;
`cpu_scope`, how this checkout's CPU was counted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling: /proc's CPU fields
from cpu_accounting import TICK, session_stats  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CGROUP_ROOT = Path("/sys/fs/cgroup")
SAMPLE_S = 0.2


def own_cgroup(proc_cgroup: str) -> tuple[str, str]:
    """(hierarchy folder under /sys/fs/cgroup, path in it) of the CPU accounting a process is
    in, from the text of its /proc/PID/cgroup: v1's `cpuacct` where it is mounted, else v2's."""
    unified = None
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return "cpuacct" if (CGROUP_ROOT / "cpuacct").is_dir() else controllers, path
        if controllers == "":
            unified = path
    if unified is None:
        raise OSError("no cpuacct or unified cgroup in /proc/self/cgroup")
    return "", unified


def own_cgroup_dir() -> Path:
    """The folder of the cgroup this process's CPU is accounted in."""
    hierarchy, path = own_cgroup(Path("/proc/self/cgroup").read_text())
    return CGROUP_ROOT / hierarchy / path.lstrip("/")


class CpuGroup:
    """A fresh cgroup that the timed command joins as it starts, and its CPU seconds: in
    `parent`, or v1's `cpuacct` root, or (cgroup v2) this process's own cgroup."""

    scope = "cgroup"

    def __init__(self, name: str, parent: Path | None = None) -> None:
        v1 = CGROUP_ROOT / "cpuacct"
        if parent is None:
            parent = v1 if (v1 / "cpuacct.usage").exists() else own_cgroup_dir()
        self.path = parent / name
        self.usage = "cpuacct.usage" if (parent / "cpuacct.usage").exists() else "cpu.stat"
        self.path.mkdir()

    def popen_options(self) -> dict:
        return {"preexec_fn": self.join}

    def join(self) -> None:
        """Move the calling process into the group."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def started(self, pid: int) -> None:
        pass

    def seconds(self) -> float:
        text = (self.path / self.usage).read_text()
        if self.usage == "cpuacct.usage":
            return int(text) / 1e9
        return int(re.search(r"usage_usec (\d+)", text).group(1)) / 1e6

    def alive(self) -> bool:
        return bool((self.path / "cgroup.procs").read_text().split())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


class SessionSampler(threading.Thread):
    """CPU seconds of the processes of the command's session, sampled every `SAMPLE_S`."""

    scope = "session-sampled"

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sid: int | None = None
        self.cpu: dict[tuple[int, str], float] = {}
        self.done = threading.Event()

    def popen_options(self) -> dict:
        return {"start_new_session": True}

    def started(self, pid: int) -> None:
        """The command runs as `pid`, the leader of its session: sample from now on."""
        self.sid = pid
        self.start()

    def run(self) -> None:
        while not self.done.is_set():
            for pid, fields in session_stats(self.sid).items():
                # keyed by pid and start time; utime and stime are stat's fields 14 and 15
                self.cpu[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / TICK
            time.sleep(SAMPLE_S)

    def alive(self) -> bool:
        return any(fields[0] != "Z" for fields in session_stats(self.sid).values())

    def seconds(self) -> float:
        return sum(self.cpu.values())

    def close(self) -> None:
        self.done.set()


def wait_for_leftovers(meter: CpuGroup | SessionSampler, settle_s: float) -> None:
    """Until what the command left running has ended, at most `settle_s`."""
    deadline = time.time() + settle_s
    while meter.alive() and time.time() < deadline:
        time.sleep(1)


def counts(output: str) -> dict[str, int]:
    """pytest's final counts ("12 passed, 1 failed in ...")."""
    tail = output.strip().splitlines()[-40:]
    found = {"passed": 0, "failed": 0, "errors": 0}
    for line in reversed(tail):
        pairs = re.findall(r"(\d+) (passed|failed|errors?)\b", line)
        if pairs:
            for number, what in pairs:
                found["errors" if what.startswith("error") else what] = int(number)
            break
    return found


def bootstrap(checkout: Path, target: str) -> None:
    """`make target` in `checkout`, untimed: whatever of the bootstrap is out of date."""
    done = subprocess.run(["make", target], cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"suite_time: `make {target}` failed in {checkout}:\n{done.stdout[-2000:]}")


def time_suite(checkout: Path, command: list[str], log: Path, settle_s: float) -> dict:
    """`command` in `checkout`: minutes, CPU seconds of all its processes, pytest's counts."""
    try:
        meter: CpuGroup | SessionSampler = CpuGroup(f"suite-time-{os.getpid()}-{checkout.name}")
    except OSError:
        meter = SessionSampler()
    start = time.time()
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, cwd=checkout, stdout=out, stderr=subprocess.STDOUT, **meter.popen_options()
        )
        meter.started(proc.pid)
        proc.wait()
    wall = time.time() - start
    wait_for_leftovers(meter, settle_s)
    cpu = meter.seconds()
    meter.close()
    output = log.read_text(errors="replace")
    if proc.returncode != 0:
        print(output[-4000:], file=sys.stderr)
    return {
        "minutes": round(wall / 60, 2),
        "cpu_s": round(cpu, 1),
        "busy": round(cpu / wall / os.cpu_count(), 2),
        "cpu_scope": meter.scope,
        "returncode": proc.returncode,
        **counts(output),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="a checkout to compare")
    parser.add_argument("--command", default="make test", help="what to time on each side")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds to wait for leftovers")
    parser.add_argument("--bootstrap", default=".venv/.installed-dev", help="make target, untimed")
    args = parser.parse_args()
    if not (args.reference / ".venv").is_dir():
        sys.exit(f"suite_time: {args.reference} has no .venv: run `make test` there once first")
    command = args.command.split()
    for checkout in (args.reference, REPO):
        bootstrap(checkout, args.bootstrap)
    logs = Path(tempfile.mkdtemp(prefix="suite-time-"))
    reference = time_suite(args.reference.resolve(), command, logs / "reference.log", args.settle)
    print(f"reference: {json.dumps(reference)}", flush=True)
    here = time_suite(REPO, command, logs / "lmforge.log", args.settle)
    print(f"lmforge: {json.dumps(here)}  (logs: {logs})", flush=True)
    print(
        json.dumps(
            {
                "bench": "suite_time",
                "lmforge": here["minutes"],
                "reference": reference["minutes"],
                "ratio": round(here["minutes"] / reference["minutes"], 3),
                "passed": here["passed"],
                "failed": here["failed"] + here["errors"],
                "reference_passed": reference["passed"],
                "reference_failed": reference["failed"] + reference["errors"],
                "cpu_s": here["cpu_s"],
                "reference_cpu_s": reference["cpu_s"],
                "busy": here["busy"],
                "reference_busy": reference["busy"],
                "cpu_scope": here["cpu_scope"],
            }
        )
    )


if __name__ == "__main__":
    main()
