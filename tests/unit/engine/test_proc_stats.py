"""Peak memory per task in a reused process: what an earlier task freed does not count."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lmforge.pipeline.proc_stats import peak_rss_bytes

TASKS_IN_ONE_WORKER = """
import gc, json
import pyarrow as pa, pyarrow.compute as pc
from lmforge.pipeline.proc_stats import reset_peak_rss, rss_bytes, task_peak_rss_bytes

# An earlier task in this worker: Arrow strings and Python objects, then freed.
strings = pa.array([f"document {i} and some of its words" for i in range(2_000_000)])
upper = pc.utf8_upper(strings)
rows = [{"id": i, "text": str(i)} for i in range(500_000)]
del strings, upper, rows
gc.collect()
left = rss_bytes()
reset_peak_rss()  # the next task starts
print(json.dumps({"left_after_free": left, "next_task_peak": task_peak_rss_bytes()}))
"""


@pytest.mark.skipif(peak_rss_bytes() is None, reason="needs /proc")
def test_a_task_after_a_freed_one_does_not_inherit_its_retained_memory():
    proc = subprocess.run(
        [sys.executable, "-c", TASKS_IN_ONE_WORKER], capture_output=True, text=True, check=True
    )
    mb = {k: v / 2**20 for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}
    # Arrow's allocator keeps well over 100 MB of the freed strings resident until released.
    assert mb["next_task_peak"] < mb["left_after_free"] - 80, mb
