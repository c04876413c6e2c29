"""The CPU seconds of each test, every process it started included (Ray's runtimes and workers,
CLI subprocesses): where the suite's CPU goes, test by test and file by file.

    LMFORGE_CPU_BY_TEST=/tmp/cpu.jsonl make test
    .venv/bin/python tests/cpu_by_test.py /tmp/cpu.jsonl [--top 30]

Each pytest process (each xdist worker) moves itself into a cgroup of its own, a child of the
one it runs in (cgroup v1's `cpuacct`, or v2), which every process it starts joins, whatever it
does afterwards (Ray's raylet ignores SIGCHLD, so its workers' CPU never reaches a parent's
rusage). A test's CPU is its group's usage after the test minus before: its fixtures' set-up and
a module fixture's teardown count to the test that ran them, and a process that outlives its test
counts to the next ones of its worker. The parent's usage still holds the children's, so
`bench/suite_time.py`'s total is unchanged. Needs the right to create cgroups (root, or a
delegated v2 subtree); without it the suite runs unmeasured, with one warning.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "LMFORGE_CPU_BY_TEST"


class CpuByTest:
    """The plugin: one cgroup for this pytest process (`bench/suite_time.py`'s `CpuGroup`, in
    the cgroup the process was in), one JSON line per test."""

    def __init__(self, out: Path) -> None:
        from bench_modules import load_bench

        suite_time = load_bench("suite_time")
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        name = f"lmforge-tests-{worker}-{os.getpid()}"
        self.group = suite_time.CpuGroup(name, parent=suite_time.own_cgroup_dir())
        self.group.join()
        self.out, self.worker = out, worker

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu, wall = self.group.seconds(), time.monotonic()
        yield
        row = {
            "id": item.nodeid,
            "cpu_s": round(self.group.seconds() - cpu, 2),
            "wall_s": round(time.monotonic() - wall, 2),
            "worker": self.worker,
        }
        with self.out.open("a") as f:  # one short line per write: whole lines across workers
            f.write(json.dumps(row) + "\n")

    def pytest_unconfigure(self, config):
        try:  # back to the parent, then the group removed (unless processes of a test live on)
            (self.group.path.parent / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            return
        self.group.close()


def register(config: pytest.Config) -> None:
    """Measure each test when `LMFORGE_CPU_BY_TEST` names an output file."""
    out = os.environ.get(ENV)
    if not out or (config.pluginmanager.hasplugin("xdist") and not _is_worker(config)):
        return  # the xdist controller runs no test
    try:
        plugin = CpuByTest(Path(out))
    except OSError as exc:
        warnings.warn(f"{ENV}: cannot make a cgroup ({exc}); tests run unmeasured", stacklevel=1)
        return
    config.pluginmanager.register(plugin, "lmforge-cpu-by-test")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput") or config.getoption("numprocesses", None) in (None, 0)


def by_file(rows: list[dict]) -> list[dict]:
    """Per test file: CPU and wall seconds and tests, most CPU first."""
    files: dict[str, dict] = defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0, "tests": 0})
    for row in rows:
        entry = files[row["id"].split("::", 1)[0]]
        entry["cpu_s"] += row["cpu_s"]
        entry["wall_s"] += row["wall_s"]
        entry["tests"] += 1
    table = [{"file": name, **entry} for name, entry in files.items()]
    for entry in table:
        entry["cpu_s"], entry["wall_s"] = round(entry["cpu_s"], 1), round(entry["wall_s"], 1)
    return sorted(table, key=lambda e: -e["cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU seconds by test file, most first")
    parser.add_argument("rows", type=Path, help=f"the file {ENV} named")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.strip()]
    table = by_file(rows)
    total = sum(e["cpu_s"] for e in table)
    print(f"{len(rows)} tests, {total:.0f} CPU-s")
    print("| file | CPU-s | share | wall-s | tests |\n|---|---|---|---|---|")
    for e in table[: args.top]:
        share = e["cpu_s"] / total if total else 0.0
        print(
            f"| `{e['file']}` | {e['cpu_s']:.0f} | {share:.0%} | {e['wall_s']:.0f} | {e['tests']} |"
        )


if __name__ == "__main__":
    main()
