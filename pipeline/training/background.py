"""Background threads that take only the CPU time training leaves idle.

A checkpoint writer hashes and writes gigabytes while training goes on. At equal priority it
takes a full share of the cores the training threads use, and every step it overlaps runs that
much slower. On Linux nice values are per thread, so the writer lowers its own to the lowest
(19): it then runs mostly while the training threads wait (on collectives, on the data loader,
on a GPU) and the save takes longer instead of the steps. The GIL is not a concern: hashing
and file writes release it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

LOWEST_PRIORITY = 19


def lower_this_thread_priority(niceness: int = LOWEST_PRIORITY) -> bool:
    """Give the calling thread (only) the nice value `niceness`; False where the OS cannot."""
    if sys.platform != "linux":  # elsewhere setpriority would change the whole process
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except OSError:
        return False
    return True


def start_low_priority_thread(
    target: Callable[..., None], args: tuple, name: str
) -> threading.Thread:
    """Start a daemon thread running `target(*args)` at the lowest CPU priority."""

    def run() -> None:
        lower_this_thread_priority()
        target(*args)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
