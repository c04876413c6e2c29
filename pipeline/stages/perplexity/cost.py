"""The cost of `perplexity` (`stage.py` beside it): a pool of Ray actors (`actors`, 0 =
one per GPU, else one per `threads_per_actor` CPUs of the cluster) scores up to `max_tokens`
validation tokens (sliding windows: block / stride passes over each) with the trained and a
freshly initialised model, and `max_documents` documents; the coordinator plans the windows from the
split's index and fits n-gram baselines on up to 2M train tokens. Memory: the coordinator's base;
each actor a base (the same imports: torch and the model) and two fp32 copies of the weights."""

from __future__ import annotations

from lmforge.pipeline.estimate.cost_model import Cluster, StageCost, config_part
from lmforge.pipeline.evaluation.generation_cost import (
    generation_wall,
    model_flow,
    model_of_run,
    pool_processes,
    pool_size,
)

BASELINE_TOKENS = 2_000_000
"""Train tokens the n-gram baselines are fitted on at most."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    val_docs = flow["docs_out"] * config["data"]["val_fraction"]
    return (
        _size(
            config["eval"]["perplexity"],
            config["model"]["block_size"],
            flow["val_tokens"],
            val_docs,
            flow["train_tokens"],
        )
        | model_flow(flow)
        | pool_size(config["eval"]["perplexity"], cluster, flow.get("mfu"))
    )


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
    return (
        _size(
            config_part(sections, "eval.perplexity"),
            block,
            tok.get("val_tokens", 0),
            tok.get("val_docs", 0),
            tok.get("train_tokens", 0),
        )
        | model_of_run(upstream)
        | pool_size(config_part(sections, "eval.perplexity"), cluster)
    )


def measured_of_run(summary: dict) -> dict[str, float]:
    peak = summary.get("scoring_actor_peak_rss_mb")
    return {"actor_rss_mb": float(peak)} if peak else {}


def cost(s: dict[str, float]) -> StageCost:
    actors = max(1, s.get("actors", 1))
    scored = (2 * s["window_tokens"] + s["document_tokens"]) / actors
    wall = generation_wall(s, 0.0, 0.0, scored)
    wall.pop("s_per_generated_token")
    wall.pop("s_per_generation_step")
    wall["s_per_baseline_token"] = s["baseline_tokens"]
    processes = pool_processes(s, "eval.perplexity", copies=2)
    return StageCost(wall_s=wall, store_bytes={"store_bytes": 1}, processes=processes)
