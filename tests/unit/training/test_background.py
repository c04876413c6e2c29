"""Checkpoint writer threads give way to training: their own nice value only, not the process's."""

import os
import sys
import threading

import pytest

from lmforge.pipeline.training.background import (
    LOWEST_PRIORITY,
    start_low_priority_thread,
)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def _niceness_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@linux_only
def test_the_thread_runs_at_the_lowest_priority_and_the_caller_keeps_its_own():
    caller_before = _niceness_of(threading.get_native_id())
    seen: dict[str, int] = {}

    def record(key: str) -> None:
        seen[key] = _niceness_of(threading.get_native_id())

    thread = start_low_priority_thread(record, ("writer",), name="writer")
    thread.join(timeout=10)
    assert not thread.is_alive() and thread.daemon
    assert seen == {"writer": LOWEST_PRIORITY}
    assert _niceness_of(threading.get_native_id()) == caller_before
    assert _niceness_of(os.getpid()) == caller_before  # the process (its main thread) unchanged


def test_the_target_runs_with_its_arguments_on_a_named_daemon_thread():
    results: list[tuple[int, int]] = []
    thread = start_low_priority_thread(lambda a, b: results.append((a, b)), (1, 2), name="t")
    thread.join(timeout=10)
    assert results == [(1, 2)] and thread.name == "t" and thread.daemon
