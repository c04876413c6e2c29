"""`bench/suite_time.py`: pytest's counts read from its last line, and the CPU seconds of a
process the timed command left orphaned counted all the same (the bench is the subreaper)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from bench_modules import BENCH, load_bench

suite_time = load_bench("suite_time")


def test_the_counts_are_read_from_pytests_last_summary_line():
    output = "....F.\n= 1 failed, 1506 passed, 116 warnings, 2 errors in 1236.21s (0:20:36) =\n"
    assert suite_time.counts(output) == {"passed": 1506, "failed": 1, "errors": 2}
    assert suite_time.counts("1507 passed in 3.0s\n") == {"passed": 1507, "failed": 0, "errors": 0}


def test_an_orphan_of_the_timed_command_is_reaped_and_its_cpu_counted(tmp_path):
    # The command starts a grandchild that burns about 0.6 s of CPU after its parent exits: it
    # is reparented to the bench, which reaps it and so counts its CPU.
    burner = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
    command = [
        sys.executable, "-c",
        f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {burner!r}])",
    ]  # fmt: skip
    script = textwrap.dedent(
        f"""
        import ctypes, json, sys
        from pathlib import Path
        sys.path.insert(0, {str(BENCH)!r})
        import suite_time
        ctypes.CDLL(None).prctl(suite_time.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        timed = suite_time.time_suite(Path.cwd(), {command!r}, Path({str(tmp_path / "log")!r}), 30)
        print(json.dumps(timed))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    timed = json.loads(done.stdout.strip().splitlines()[-1])
    assert timed["returncode"] == 0
    assert timed["cpu_s"] >= 0.5, timed
