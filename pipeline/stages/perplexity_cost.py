"""The cost of `perplexity` (pipeline/stages/perplexity.py), as it runs today: one process
scores up to `max_tokens` validation tokens (sliding windows: block / stride passes over each)
with the trained and a freshly initialised model, scores `max_documents` documents one by one,
and fits n-gram baselines on up to 2M train tokens. Memory: a base, the scored stream per
token, and two fp32 copies of the weights."""

from __future__ import annotations

from lmforge.pipeline.cost_model import Cluster, StageCost, config_part
from lmforge.pipeline.stages.generation_work import (
    generation_wall,
    model_flow,
    model_of_run,
    model_process,
)

STAGE = "perplexity"
INPUTS = ("pretrain", "tokenize", "train_tokenizer", "clean")

BASELINE_TOKENS = 2_000_000
"""Train tokens the n-gram baselines are fitted on at most."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    val_docs = flow["docs_out"] * config["data"]["val_fraction"]
    return _size(
        config["eval"]["perplexity"],
        config["model"]["block_size"],
        flow["val_tokens"],
        val_docs,
        flow["train_tokens"],
    ) | model_flow(flow)


def _size(cfg: dict, block: int, val_tokens: float, val_docs: float, train_tokens: float) -> dict:
    scored = val_tokens if not cfg["max_tokens"] else min(cfg["max_tokens"], val_tokens)
    documents = val_docs if not cfg["max_documents"] else min(cfg["max_documents"], val_docs)
    passes = block / (cfg["stride"] or block)
    return {
        "scored_tokens": scored,
        "window_tokens": scored * passes,
        "document_tokens": val_tokens * documents / max(1.0, val_docs) * passes,
        "baseline_tokens": min(BASELINE_TOKENS, train_tokens),
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    tok = upstream.get("tokenize", {})
    model = upstream.get("pretrain", {})
    block = model.get("block_size") or 128
    return _size(
        config_part(sections, "eval.perplexity"),
        block,
        tok.get("val_tokens", 0),
        tok.get("val_docs", 0),
        tok.get("train_tokens", 0),
    ) | model_of_run(upstream)


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    wall = generation_wall(s, 0.0, 0.0, 2 * s["window_tokens"] + s["document_tokens"])
    wall.pop("s_per_generated_token")
    wall.pop("s_per_generation_step")
    wall["s_per_baseline_token"] = s["baseline_tokens"]
    process = model_process(s, copies=2)
    process.rss_mb["coordinator_mb_per_token"] = s["scored_tokens"]
    return StageCost(wall_s=wall, store_bytes={"store_bytes": 1}, processes=[process])
