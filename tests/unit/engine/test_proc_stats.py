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


BUILT_WHOLE_THEN_PARTITIONED = """
import contextlib, json, sys
import torch
from lmforge.pipeline.proc_stats import large_allocations_mapped, rss_bytes

MB = 1 << 20
scratch = torch.ones(40 * MB // 4)
del scratch  # glibc's mmap threshold rises to its ceiling, as after any large free
before = rss_bytes()
kept = []
with large_allocations_mapped() if sys.argv[1] == "mapped" else contextlib.nullcontext():
    for _ in range(30):
        for mb in (16, 4, 12):  # like ZeRO-3's build: each module whole, then half of it kept
            whole = torch.ones(mb * MB // 4)
            kept.append(whole[: whole.numel() // 2].clone())
            del whole
held = sum(t.numel() * 4 for t in kept)
print(json.dumps({"rise_mb": (rss_bytes() - before) / MB, "held_mb": held / MB}))
"""


def _resident_beyond_kept(mode: str) -> float:
    proc = subprocess.run(
        [sys.executable, "-c", BUILT_WHOLE_THEN_PARTITIONED, mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures = json.loads(proc.stdout.splitlines()[-1])
    return figures["rise_mb"] - figures["held_mb"]


@pytest.mark.skipif(peak_rss_bytes() is None, reason="needs /proc")
def test_whole_tensors_dropped_for_their_parts_do_not_stay_resident():
    # The same work on the heap keeps tens of MB of freed whole tensors resident (fragments).
    assert _resident_beyond_kept("heap") > 32
    assert _resident_beyond_kept("mapped") < 16
