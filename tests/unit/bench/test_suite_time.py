"""`bench/suite_time.py`: pytest's counts read from its last line, and the CPU seconds of a
process the timed command left orphaned counted all the same, in a cgroup and by sampling its
session."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from bench_modules import BENCH, load_bench

suite_time = load_bench("suite_time")

BURNER = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n"
ORPHANING = [
    sys.executable, "-c",
    f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {BURNER!r}])",
]  # fmt: skip
"""A command that exits at once, leaving a process that burns about 1 s of CPU."""


def test_the_counts_are_read_from_pytests_last_summary_line():
    output = "....F.\n= 1 failed, 1506 passed, 116 warnings, 2 errors in 1236.21s (0:20:36) =\n"
    assert suite_time.counts(output) == {"passed": 1506, "failed": 1, "errors": 2}
    assert suite_time.counts("1507 passed in 3.0s\n") == {"passed": 1507, "failed": 0, "errors": 0}


@pytest.mark.parametrize("scope", ["cgroup", "session-sampled"])
def test_an_orphan_of_the_timed_command_is_waited_for_and_its_cpu_counted(tmp_path, scope):
    # In a process of its own: a cgroup it made would outlive a failed assertion here.
    no_cgroup = "suite_time.CpuGroup = lambda name: open('/nonexistent/cgroup')"
    no_cgroup = no_cgroup if scope == "session-sampled" else ""
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        sys.path.insert(0, {str(BENCH)!r})
        import suite_time
        {no_cgroup}
        log = Path({str(tmp_path / "log")!r})
        timed = suite_time.time_suite(Path.cwd(), {ORPHANING!r}, log, 30)
        print(json.dumps(timed))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    timed = json.loads(done.stdout.strip().splitlines()[-1])
    if scope == "cgroup" and timed["cpu_scope"] != "cgroup":
        pytest.skip("this machine lets no cgroup be made here: the sampled count is the check")
    assert timed["cpu_scope"] == scope and timed["returncode"] == 0
    assert timed["cpu_s"] >= 0.7, timed
