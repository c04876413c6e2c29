"""The cost of `harm` (pipeline/stages/harm.py): toxicity, bias, memorisation and PII-leakage
probes, all generating with the trained model in one process (`generation_work`), plus a scan
of up to 100,000 training documents for PII."""

from __future__ import annotations

from lmforge.pipeline.cost_model import Cluster, StageCost, config_part
from lmforge.pipeline.stages.generation_work import (
    generation_wall,
    model_flow,
    model_of_run,
    model_process,
)

STAGE = "harm"
INPUTS = ("pretrain", "train_tokenizer", "clean", "tokenize")

TOXICITY_PROMPTS = 120
"""Prompts in conf/eval/toxicity_prompts.jsonl (`num_prompts: 0` uses them all)."""
BIAS_PROMPTS = 144
"""12 groups x 12 templates in conf/eval/bias_templates.json."""
PII_SCAN_DOCS = 100_000
"""Training documents the PII probe reads at most."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return _size(config["eval"]["harm"], flow.get("docs_out", 0)) | model_flow(flow)


def _size(cfg: dict, train_docs: float) -> dict[str, float]:
    prompts = cfg["num_prompts"] or TOXICITY_PROMPTS
    generated = (
        prompts * cfg["samples_per_prompt"] * cfg["max_new_tokens"]
        + BIAS_PROMPTS * cfg["bias_samples"] * cfg["max_new_tokens"]
        + cfg["extraction_prefixes"] * cfg["extraction_tokens"]
        + cfg["pii_samples"] * 2 * cfg["max_new_tokens"]
    )
    new = cfg["max_new_tokens"]
    steps = (  # one batched call per probe
        new
        + (new if cfg["bias_samples"] else 0)
        + (cfg["extraction_tokens"] if cfg["extraction_prefixes"] else 0)
        + (2 * new if cfg["pii_samples"] else 0)
    )
    scanned = min(train_docs, PII_SCAN_DOCS) if cfg["pii_samples"] else 0
    return {"generated": generated, "steps": steps, "pii_scan_docs": scanned}


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    train_docs = upstream.get("clean", {}).get("train_docs", 0)
    return _size(config_part(sections, "eval.harm"), train_docs) | model_of_run(upstream)


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    wall = generation_wall(s, s["generated"], s["steps"])
    wall["s_per_scanned_doc"] = s["pii_scan_docs"]
    return StageCost(
        wall_s=wall,
        store_bytes={"store_bytes": 1},
        processes=[model_process(s)],
    )
