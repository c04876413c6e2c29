"""Each CPU worker's training thread on its own cores, when a run's workers fill their node.

Data-parallel ranks meet at every step's collectives, so each step lasts as long as the slower
rank's. Left to the scheduler, two ranks on two cores share them with everything else that
runs (Ray's processes, gloo's threads) and move between them; kept each on its own core, a
rank's thread keeps that core's caches. On a 2-vCPU Intel Xeon the tiny preset's two workers
trained at 0.86-0.89x a plain two-thread loop unpinned and at 0.92x pinned, in alternated runs
of `bench/train_throughput.py --model tiny` (docs/benchmarks.md).

Pinning is only safe where the run owns the node's CPUs: several workers of one run whose CPUs
(`train.cpus_per_worker` each) add up to all the CPUs the node gives Ray. On a larger node shared
with other work, or with one worker per node, nothing is pinned: two runs pinned to the same
first cores of a 64-core node would share them while the rest stay idle.
"""

from __future__ import annotations

import os
from collections.abc import Collection


def cpu_share(
    local_rank: int,
    local_world_size: int,
    cpus_per_worker: int,
    node_cpus: float,
    allowed: Collection[int],
) -> list[int] | None:
    """The CPUs local rank `local_rank` keeps its training thread on, or None to leave it where
    the scheduler puts it.

    `node_cpus` is the CPU count the node gives Ray; `allowed` the CPUs this process may run on
    (its affinity: a container's cpuset, say). A share is given only when the run's workers on
    this node hold all of the node's CPUs between them, and the process may use that many."""
    if local_world_size < 2 or cpus_per_worker < 1:
        return None
    held = local_world_size * cpus_per_worker
    if held != node_cpus or held > len(allowed):
        return None
    start = local_rank * cpus_per_worker
    return sorted(allowed)[start : start + cpus_per_worker]


def node_cpu_count() -> float:
    """The CPUs this Ray node gives the cluster (its `CPU` resource)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node["NodeID"] == here:
            return float(node["Resources"].get("CPU", 0.0))
    return 0.0


def pin_training_thread(
    local_rank: int, local_world_size: int, cpus_per_worker: int
) -> list[int] | None:
    """Keep the calling thread (and the threads it starts later: torch's intra-op pool, the
    read-ahead and checkpoint writers) on its `cpu_share`; the share, or None where it stays
    unpinned. Threads started before (gloo's, Ray's) keep the process's affinity. Where the OS
    sets no thread affinity (macOS), nothing is pinned."""
    if local_world_size < 2 or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    share = cpu_share(local_rank, local_world_size, cpus_per_worker, node_cpu_count(), allowed)
    if share is not None:
        os.sched_setaffinity(0, share)  # pid 0: the calling thread
    return share


def thread_cpus() -> list[int]:
    """The CPUs the calling thread may run on (every CPU where the OS does not say)."""
    if not hasattr(os, "sched_getaffinity"):
        return list(range(os.cpu_count() or 1))
    return sorted(os.sched_getaffinity(0))
