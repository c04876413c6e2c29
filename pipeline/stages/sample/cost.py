"""The cost of `sample` (`stage.py` beside it): greedy and top-p continuations of each
prompt, one pool call per mode, on the stage's model actors (what they cost:
`pipeline/evaluation/generation_cost.py`)."""

from __future__ import annotations

from lmforge.pipeline.estimate.cost_model import Cluster, StageCost, config_part
from lmforge.pipeline.evaluation.generation_cost import (
    generation_wall,
    model_flow,
    model_of_run,
    pool_processes,
    pool_size,
    pooled_generation,
)

MODES = 2
"""Greedy and top-p."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return _size(config["eval"]["sample"], cluster, flow.get("mfu")) | model_flow(flow)


def _size(cfg: dict, cluster: Cluster, mfu: float | None = None) -> dict[str, float]:
    pool = pool_size(cfg, cluster, mfu)
    calls = [(len(cfg["prompts"]), cfg["max_new_tokens"])] * MODES
    return pool | pooled_generation(calls, int(cfg.get("batch_size", 16)), int(pool["actors"]))


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    return _size(config_part(sections, "eval.sample"), cluster) | model_of_run(upstream)


def measured_of_run(summary: dict) -> dict[str, float]:
    peak = summary.get("actor_peak_rss_mb")
    return {"actor_rss_mb": float(peak)} if peak else {}


def cost(s: dict[str, float]) -> StageCost:
    return StageCost(
        wall_s=generation_wall(s, s["generated"], s["steps"]),
        store_bytes={"store_bytes": 1},
        processes=pool_processes(s, "eval.sample"),
    )
