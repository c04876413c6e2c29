"""The cost of `harm` (`stage.py` beside it): toxicity, bias, memorisation and PII-leakage
probes, one pool call each on the stage's model actors (what they cost:
`pipeline/evaluation/generation_cost.py`), plus the coordinator's scan of up to 100,000 training
documents for PII."""

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

TOXICITY_PROMPTS = 120
"""Prompts in conf/eval/toxicity_prompts.jsonl (`num_prompts: 0` uses them all)."""
BIAS_PROMPTS = 144
"""12 groups x 12 templates in conf/eval/bias_templates.json."""
PII_SCAN_DOCS = 100_000
"""Training documents the PII probe reads at most."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    harm = config["eval"]["harm"]
    return _size(harm, flow.get("docs_out", 0), cluster, flow.get("mfu")) | model_flow(flow)


def _size(
    cfg: dict, train_docs: float, cluster: Cluster, mfu: float | None = None
) -> dict[str, float]:
    prompts = cfg["num_prompts"] or TOXICITY_PROMPTS
    new = cfg["max_new_tokens"]
    calls = [  # (rows, new tokens) of each probe's one pool call
        (prompts * cfg["samples_per_prompt"], new),
        (BIAS_PROMPTS * cfg["bias_samples"], new),
        (cfg["extraction_prefixes"], cfg["extraction_tokens"]),
        (cfg["pii_samples"], 2 * new),
    ]
    pool = pool_size(cfg, cluster, mfu)
    work = pooled_generation(calls, int(cfg.get("batch_size", 16)), int(pool["actors"]))
    scanned = min(train_docs, PII_SCAN_DOCS) if cfg["pii_samples"] else 0
    return pool | work | {"pii_scan_docs": scanned}


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    train_docs = upstream.get("clean", {}).get("train_docs", 0)
    cfg = config_part(sections, "eval.harm")
    return _size(cfg, train_docs, cluster) | model_of_run(upstream)


def measured_of_run(summary: dict) -> dict[str, float]:
    peak = summary.get("actor_peak_rss_mb")
    return {"actor_rss_mb": float(peak)} if peak else {}


def cost(s: dict[str, float]) -> StageCost:
    wall = generation_wall(s, s["generated"], s["steps"])
    wall["s_per_scanned_doc"] = s["pii_scan_docs"]
    return StageCost(
        wall_s=wall,
        store_bytes={"store_bytes": 1},
        processes=pool_processes(s, "eval.harm"),
    )
