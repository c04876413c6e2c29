"""The cost of `dedup_across` (`stage.py` beside it), for `lmforge estimate` and the run records:
not fitted yet, so stated in known terms: a few seconds, a coordinator's base and the remove
lists it writes (which grow with the duplicates found, not with the corpus)."""

from __future__ import annotations

from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster, ProcessCost, StageCost


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return {}


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    return {}


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    return StageCost(
        wall_s={KNOWN: 5.0},
        store_bytes={KNOWN: 1e5},
        processes=[ProcessCost("coordinator", {KNOWN: 300.0}, coordinator=True)],
    )
