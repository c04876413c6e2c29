"""The cost of `tokenize` (`stage.py` beside it).

One task per token shard (consecutive clean shards grouped up to `tokenizer.shard_mb` of
tokens), each on one CPU, encoding batch by batch (memory: a base, bounded by the batch, not the
shard); the stage process streams the validation texts once to count their bytes. Wall time: a
fixed start-up plus CPU-seconds per byte of text over the CPUs the shards can keep busy (no more
tasks than shards). Bytes written, by arithmetic: every token at 2 bytes (4 past 65,536 ids)
and an 8-byte start per document.
"""

from __future__ import annotations

import math

from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster, ProcessCost, StageCost, config_part

UINT16_VOCAB = 1 << 16


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    text = flow["train_text_bytes"] + flow["val_text_bytes"]
    vocab = config["tokenizer"]["vocab_size"]
    tokens = text / flow["bytes_per_token"]
    target = config["tokenizer"].get("shard_mb", 0) * 1e6
    shards = math.ceil(tokens * _width(vocab) / target) + 1 if target else flow["clean_shards"]
    return {
        **cluster.as_size(),
        "text_bytes": text,
        "val_text_bytes": flow["val_text_bytes"],
        "docs": flow["docs_out"],
        "shards": max(2, shards),  # a train and a val shard at least
        "bytes_per_token": flow["bytes_per_token"],
        "vocab_size": vocab,
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    tokens = summary["train_tokens"] + summary["val_tokens"]
    tok = upstream.get("train_tokenizer", {})
    per_token = tok.get("val_bytes_per_token") or 1.0
    return {
        **cluster.as_size(),
        "text_bytes": tokens * per_token,
        "val_text_bytes": summary.get("val_bytes", summary["val_tokens"] * per_token),
        "docs": summary["train_docs"] + summary["val_docs"],
        "shards": summary.get("shards") or 1,
        "bytes_per_token": per_token,
        "vocab_size": tok.get("val_vocab_size")
        or config_part(sections, "tokenizer").get("vocab_size", UINT16_VOCAB),
    }


def _width(vocab_size: float) -> int:
    return 2 if vocab_size <= UINT16_VOCAB else 4


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    tokens = s["text_bytes"] / s["bytes_per_token"]
    width = _width(s["vocab_size"])
    busy = max(1.0, min(s["cpus"], s["shards"]))
    return StageCost(
        wall_s={
            "fixed_s": 1 - s.get("startup_excluded", 0),  # a throughput bench leaves it out
            "cpu_s_per_byte": s["text_bytes"] / busy,
            "s_per_val_byte": s["val_text_bytes"],
        },
        store_bytes={KNOWN: tokens * width + 8 * s["docs"]},
        processes=[
            ProcessCost("coordinator", {"coordinator_mb": 1}, coordinator=True),
            ProcessCost(
                "tokenize task",
                {"task_mb": 1},
                per_node=int(s["cpus_per_node"]),
                remedy="nodes with more memory per CPU (no setting shrinks a tokenize task)",
            ),
        ],
        outputs={
            "train_tokens": tokens * (1 - s["val_text_bytes"] / max(1.0, s["text_bytes"])),
            "val_tokens": tokens * s["val_text_bytes"] / max(1.0, s["text_bytes"]),
        },
        notes=[f"{tokens:.3g} tokens over {int(s['shards'])} shard tasks"],
    )
