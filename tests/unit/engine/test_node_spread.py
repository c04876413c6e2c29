"""Which node each short task is pinned to: a round robin weighted by the nodes' CPUs."""

from __future__ import annotations

from lmforge.pipeline.cluster.placement import cpu_slots


def _node(node_id: str, cpus: float, alive: bool = True) -> dict:
    return {"NodeID": node_id, "Alive": alive, "Resources": {"CPU": cpus} if cpus else {}}


def test_each_node_takes_a_slot_a_round_for_each_cpu():
    nodes = [_node("b", 1), _node("a", 3)]
    assert cpu_slots(nodes) == ["a", "b", "a", "a"]


def test_every_node_gets_tasks_however_few_there_are():
    slots = cpu_slots([_node("head", 1), _node("worker", 1)])
    assert sorted(slots[:2]) == ["head", "worker"]


def test_dead_nodes_and_nodes_too_small_for_a_task_take_none():
    nodes = [_node("dead", 4, alive=False), _node("gpu-only", 0), _node("half", 0.5), _node("a", 2)]
    assert cpu_slots(nodes) == ["a", "a"]
    assert cpu_slots(nodes, cpus_per_task=2) == ["a"]


def test_no_node_that_can_run_a_task_gives_no_slot():
    assert cpu_slots([]) == []
    assert cpu_slots([_node("gpu-only", 0)]) == []
