"""Short tasks spread over a cluster's nodes in proportion to their CPUs, for sure.

Ray's SPREAD strategy is best-effort: it places each task by the cluster's resource view of the
moment, which lags on a loaded machine, so short tasks land on whichever node last reported free
CPUs (the private-nodes bucket test saw every `tokenize` task on the head node, now and then).
Here task i goes to the i-th slot of a round robin over the nodes, each node taking as many
slots a round as it has CPUs, with soft node affinity: a node that is alive and can run the task
gets it (it waits there for a free CPU), and one that has died or cannot run it leaves its tasks
to the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def cpu_slots(nodes: Iterable[Mapping[str, Any]], cpus_per_task: float = 1.0) -> list[str]:
    """Node ids in round-robin order, each alive node once a round for every `cpus_per_task`
    CPUs it has: [a, b, a] for a node a with 2 CPUs and b with 1. `nodes` as `ray.nodes()`
    lists them; nodes too small for a task are left out."""
    widths = {
        node["NodeID"]: int(node.get("Resources", {}).get("CPU", 0) // cpus_per_task)
        for node in nodes
        if node.get("Alive")
    }
    slots: list[str] = []
    for round_ in range(max(widths.values(), default=0)):
        slots += [node for node in sorted(widths) if widths[node] > round_]
    return slots


def spread_strategies(count: int, cpus_per_task: float = 1.0) -> list[Any]:
    """The scheduling strategy of each of `count` tasks (`cpu_slots` in turn); Ray's default for
    each when the cluster has one node that can run them, or none."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    slots = cpu_slots(ray.nodes(), cpus_per_task)
    if len(set(slots)) < 2:
        return ["DEFAULT"] * count
    return [
        NodeAffinitySchedulingStrategy(node_id=slots[i % len(slots)], soft=True)
        for i in range(count)
    ]
