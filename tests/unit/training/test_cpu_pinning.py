"""CPU workers keep their training threads on their own cores only where the run's workers hold
all of their node's CPUs: each local rank gets its own `cpus_per_worker` of the CPUs the process
may use, and a run that leaves CPUs to other work, or one worker alone, stays unpinned."""

import os
import threading

import pytest

from lmforge.pipeline.training.cpu_pinning import cpu_share, thread_cpus


def test_workers_that_fill_the_node_each_get_their_own_cpus():
    allowed = {0, 1}
    assert cpu_share(0, 2, 1, node_cpus=2, allowed=allowed) == [0]
    assert cpu_share(1, 2, 1, node_cpus=2, allowed=allowed) == [1]
    shares = [cpu_share(rank, 2, 4, node_cpus=8, allowed=range(8)) for rank in range(2)]
    assert shares == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_the_shares_are_taken_from_the_cpus_the_process_may_use():
    # a container's cpuset: CPUs 4, 6, 9 and 11 of the machine, in no particular order
    allowed = {11, 4, 9, 6}
    shares = [cpu_share(rank, 2, 2, node_cpus=4, allowed=allowed) for rank in range(2)]
    assert shares == [[4, 6], [9, 11]]


@pytest.mark.parametrize(
    ("local_world", "cpus_per_worker", "node_cpus", "allowed"),
    [
        (1, 2, 2, {0, 1}),  # one worker: no other rank to wait for
        (2, 1, 16, range(16)),  # a larger node shared with other work: nothing pinned
        (2, 1, 2.5, {0, 1}),  # the node's CPUs are not the workers' exactly
        (2, 2, 4, {0, 1}),  # Ray counts more CPUs than the process may use
        (2, 0, 0, {0, 1}),  # workers that reserve no CPUs
    ],
)
def test_a_run_that_does_not_hold_its_node_stays_unpinned(
    local_world, cpus_per_worker, node_cpus, allowed
):
    assert cpu_share(0, local_world, cpus_per_worker, node_cpus, allowed) is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pinning_a_thread_leaves_the_other_threads_of_the_process_alone():
    # What pin_training_thread relies on: `sched_setaffinity(0, ...)` sets the calling thread's
    # CPUs, and the threads it starts afterwards inherit them.
    before = thread_cpus()
    seen: dict[str, list[int]] = {}

    def pinned() -> None:
        os.sched_setaffinity(0, before[:1])
        child = threading.Thread(target=lambda: seen.update(child=thread_cpus()))
        child.start()
        child.join()
        seen["pinned"] = thread_cpus()

    thread = threading.Thread(target=pinned)
    thread.start()
    thread.join()
    assert seen == {"pinned": before[:1], "child": before[:1]}
    assert thread_cpus() == before
