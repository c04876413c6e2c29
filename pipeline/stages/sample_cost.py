"""The cost of `sample` (pipeline/stages/sample.py): greedy and top-p continuations of each
prompt in one process (`generation_work`)."""

from __future__ import annotations

from lmforge.pipeline.cost_model import Cluster, StageCost, config_part
from lmforge.pipeline.stages.generation_work import (
    generation_wall,
    model_flow,
    model_of_run,
    model_process,
)

STAGE = "sample"
INPUTS = ("pretrain", "train_tokenizer")
MODES = 2
"""Greedy and top-p."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return _size(config["eval"]["sample"]) | model_flow(flow)


def _size(cfg: dict) -> dict[str, float]:
    return {
        "generated": MODES * len(cfg["prompts"]) * cfg["max_new_tokens"],
        "steps": MODES * cfg["max_new_tokens"],  # one batched call per mode
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    return _size(config_part(sections, "eval.sample")) | model_of_run(upstream)


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    return StageCost(
        wall_s=generation_wall(s, s["generated"], s["steps"]),
        store_bytes={"store_bytes": 1},
        processes=[model_process(s)],
    )
