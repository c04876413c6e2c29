"""Peak memory per task in a reused process: what an earlier task freed does not count; a
training thread keeps the memory its steps free."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lmforge.pipeline.cluster.process_stats import (
    keeps_freed_memory,
    kept_memory_tunables,
    peak_rss_bytes,
)

TASKS_IN_ONE_WORKER = """
import gc, json
import pyarrow as pa, pyarrow.compute as pc
from lmforge.pipeline.cluster.process_stats import reset_peak_rss, rss_bytes, task_peak_rss_bytes

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
from lmforge.pipeline.cluster.process_stats import large_allocations_mapped, rss_bytes

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


STEPS_IN_A_THREAD = """
import json, resource, sys, threading
import torch
from lmforge.pipeline.cluster.process_stats import keep_freed_memory, large_allocations_mapped

MB = 1 << 20
out = {}


def steps(sizes_mb):
    for i in range(16):  # each step allocates its activations and frees them at its end
        if i == 6:  # the heap's layout settles in the first 2-4 steps (it grows while it does)
            start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        live = [torch.ones(int(mb * MB) // 4) for mb in sizes_mb]
        del live
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / 10


def train():  # Ray Train runs the loop in a thread of its own, as here
    out["small_step"] = steps((3, 1, 3, 2, 3, 0.5) * 4)
    if sys.argv[1] == "zero3":
        with large_allocations_mapped():  # a ZeRO-3 build's thresholds, then ours again
            pass
        keep_freed_memory()
        out["large_step"] = steps((12,) * 8)


thread = threading.Thread(target=train)
thread.start()
thread.join()
print(json.dumps(out))
"""


def _faults_per_step(env: dict[str, str], mode: str = "plain") -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", STEPS_IN_A_THREAD, mode],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.skipif(peak_rss_bytes() is None, reason="needs /proc (and glibc)")
def test_a_training_thread_started_with_the_tunables_faults_its_steps_in_no_more():
    default = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    kept = {**default, "GLIBC_TUNABLES": kept_memory_tunables(default)}
    # Under glibc's defaults the thread's own arena hands the free top of its heap back
    # (MADV_DONTNEED) as a step frees its blocks: a step of 50 MB in blocks of 0.5-3 MB faults
    # about 43 MB in again, every step once the heap has settled (10,977 pages here).
    faults = _faults_per_step(default)["small_step"]
    assert faults > 1000, faults
    assert _faults_per_step(kept)["small_step"] < faults / 4
    # After a ZeRO-3 build reset the thresholds (trim at 64 MB), a 96 MB step still keeps its
    # pages (without `keep_freed_memory` it faults most of them in again on about half of
    # the starts here: where glibc can trim depends on the heap's layout).
    assert _faults_per_step(kept, "zero3")["large_step"] < 96 * 256 / 10


def test_the_tunables_keep_a_callers_own_after_ours_and_are_recognised():
    ours = kept_memory_tunables({})
    assert ours.startswith("glibc.malloc.arena_max=1:")
    theirs = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    merged = kept_memory_tunables(theirs)
    assert merged == f"{ours}:glibc.malloc.tcache_count=0"  # later tunables win in glibc
    assert keeps_freed_memory({"GLIBC_TUNABLES": merged})
    assert not keeps_freed_memory({}) and not keeps_freed_memory(theirs)
