"""The cost of `report` (`stage.py` beside it): a model card from the other stages'
summaries and a few plots, in one process; its cost does not grow with the run."""

from __future__ import annotations

from lmforge.pipeline.estimate.cost_model import Cluster, ProcessCost, StageCost


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return {}


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    return {}


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    return StageCost(
        wall_s={"fixed_s": 1},
        store_bytes={"store_bytes": 1},
        processes=[ProcessCost("coordinator", {"coordinator_mb": 1}, coordinator=True)],
    )
