"""`make test` here and at a reference checkout, one after the other on one machine: the suite's
wall time and the CPU seconds of every process it started.

    .venv/bin/python bench/suite_time.py --reference ../lmforge-0.1.0

The reference is a checkout of another version with its `.venv` built (`make demo` or `make
test` run there once). Each side's bootstrap is brought up to date first, untimed (`make
--bootstrap`, the Makefile's stamp of the test tools): only `make test` with everything in place
is timed. The reference runs first, then this checkout.

Each side runs as a child of this process, which makes itself the child subreaper: a process the
suite leaves orphaned (a Ray runtime whose driver was killed, a server a test started) is
reparented to this process and reaped by it once it exits, so the CPU seconds of every process
the suite started, Ray's included, are in this process's children's rusage. After `make test`
exits, the bench waits (at most `--settle` seconds) for what it left running to exit.

Keys: `lmforge` and `reference`, minutes of `make test`; `ratio` (lmforge / reference; the
redesign's goal: at most 0.7, and at most 12 minutes); `passed`, `failed` and
`reference_passed`, `reference_failed`; `cpu_s` and `reference_cpu_s`, CPU seconds of every
process of each suite; `busy`, the share of the machine's CPUs each suite kept busy.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PR_SET_CHILD_SUBREAPER = 36


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_until_alone(settle_s: float) -> None:
    """Reap this process's children (orphans reparented to it included) until none is left or
    `settle_s` has passed."""
    deadline = time.time() + settle_s
    while time.time() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.5)


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
    cpu_before, start = children_cpu_s(), time.time()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=checkout, stdout=out, stderr=subprocess.STDOUT)
    wall = time.time() - start
    reap_until_alone(settle_s)
    cpu = children_cpu_s() - cpu_before
    output = log.read_text(errors="replace")
    if done.returncode != 0:
        print(output[-4000:], file=sys.stderr)
    return {
        "minutes": round(wall / 60, 2),
        "cpu_s": round(cpu, 1),
        "busy": round(cpu / wall / os.cpu_count(), 2),
        "returncode": done.returncode,
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
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("suite_time: cannot become the child subreaper: CPU seconds would miss orphans")
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
            }
        )
    )


if __name__ == "__main__":
    main()
