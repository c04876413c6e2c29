"""The cost of `clean` (`stage.py` beside it), for `lmforge estimate` and the run records.

Wall time: a fixed start-up, then CPU-seconds per document and per byte of text shared by every
CPU of the cluster (read, filter, index, dedup and shard tasks keep them all busy), with the
filter chain's per-byte cost counted when any filter is on.

Memory, one form per kind of process, each bounded by configuration and not by the corpus
(docs/architecture.md, "At scale") except where said:
- the coordinator: a base plus a little per read unit (`data.read_split_mb` sets how many);
- a filter task: a base plus per document of its unit (its index is built in memory);
- a dedup task (exact or one band's near step): per document of its key range, at most
  `DEDUP_PARTITION_DOCS`;
- the resolve task: per duplicate document (it joins the duplicate pairs: memory grows with
  what is found, not with the corpus), by arithmetic (`RESOLVE_BYTES_PER_DUPLICATE`): at the
  sizes a calibration runs, a few MB that a reused worker's base hides;
- a task that runs after the filter chain in a reused worker also holds the chain's models
  (`chain_task_mb`, when the chain is on);
- a split or shard task: a base (`data.shard_mb` bounds it).
Bytes written: per byte of input (kept text as zstd Parquet, plus the removal records).
"""

from __future__ import annotations

import math

from lmforge.pipeline.estimate.cost_model import KNOWN, Cluster, ProcessCost, StageCost, config_part
from lmforge.pipeline.stages.clean.dedup_steps import DEDUP_PARTITION_DOCS

KEEP_FRACTION = 0.6
"""Assumed share of documents and bytes that survive the filters and dedup, when the command
line does not say (`--keep-fraction`); a clean run on a sample of your corpus measures it
(`docs_out / docs_in` in its summary)."""
DUPLICATE_FRACTION = 0.2
"""Assumed share of documents that are duplicates of another (they size the resolve task)."""
TEXT_ZSTD_RATIO = 0.35
"""Bytes of zstd Parquet per byte of kept text (sizes the output shards that later stages
split their work by)."""
MB = 2**20
RESOLVE_BYTES_PER_DUPLICATE = 64
"""What the resolve step holds per duplicate at its peak (`pipeline/dedup/resolve.py`): per node
with an edge (about 1.3 per near duplicate) its int64 node, int32 forest, order and root, int64
kept node and run start (about 37 bytes), and per exact pair its two int64 nodes (16 bytes).
Measured on clean_scale: the task's rise 177 MB at 10M documents for 2.52M duplicates."""


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    data = config["data"]
    return _size(data, flow["docs"], flow["bytes"], cluster.as_size()) | {
        "keep_fraction": flow.get("keep_fraction", KEEP_FRACTION),
        "duplicate_fraction": DUPLICATE_FRACTION,
    }


def _size(data: dict, docs: float, text_bytes: float, cluster: dict) -> dict[str, float]:
    units = max(1.0, math.ceil(text_bytes / (data["read_split_mb"] * MB)))
    dedup_on = data["dedup"]["exact"]["enabled"] or data["dedup"]["near"]["enabled"]
    chain_on = any(f.get("enabled", False) for f in data["filters"].values())
    return {
        **cluster,
        "docs": docs,
        "bytes": text_bytes,
        "read_units": units,
        "chain_on": float(chain_on),
        "dedup_on": float(dedup_on),
        "val_fraction": data["val_fraction"],
        "shard_mb": data["shard_mb"],
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    docs = summary["docs_in"]
    removed = summary.get("dropped_by_reason", {})
    duplicates = removed.get("exact_duplicate", 0) + removed.get("near_duplicate", 0)
    chars_in = [c.get("chars_in", 0) for c in summary.get("filters", {}).values()]
    text_bytes = max(chars_in, default=0) or summary.get("planned_read_bytes") or 0
    return _size(config_part(sections, "data"), docs, text_bytes, cluster.as_size()) | {
        "keep_fraction": summary["docs_out"] / max(1, docs),
        "duplicate_fraction": duplicates / max(1, docs),
        "read_units": summary.get("read_units", 1),
    }


def measured_of_run(summary: dict) -> dict[str, float]:
    """Peaks the stage reports by step, as this model's processes."""
    steps = summary.get("task_peak_rss_mb", {})
    found = {
        "coordinator_rss_mb": summary.get("coordinator_peak_rss_mb"),
        "filter_task_rss_mb": steps.get("filter"),
        "dedup_task_rss_mb": max(steps.get(s, 0) for s in ("exact", "near", "paragraph")) or None,
        "resolve_task_rss_mb": steps.get("resolve"),
        "shard_task_rss_mb": max(steps.get("split", 0), steps.get("shard", 0)) or None,
    }
    return {k: float(v) for k, v in found.items() if v}


def _processes(s: dict[str, float]) -> list[ProcessCost]:
    docs, kept = s["docs"], s["docs"] * s["keep_fraction"]
    ranges = max(1, math.ceil(kept / DEDUP_PARTITION_DOCS))
    per_node = int(s["cpus_per_node"])
    return [
        ProcessCost(
            "coordinator",
            {"coordinator_mb": 1, "coordinator_mb_per_unit": s["read_units"]},
            coordinator=True,
            remedy="data.read_split_mb (fewer, larger read units) or a head node with more memory",
        ),
        ProcessCost(
            "filter task",
            {"filter_task_mb": 1, "filter_task_mb_per_doc": docs / s["read_units"]},
            per_node=per_node,
            remedy="data.read_split_mb (smaller read units)",
        ),
        ProcessCost(
            "dedup task",
            {
                "dedup_task_mb": s["dedup_on"],
                "chain_task_mb": s["dedup_on"] * s["chain_on"],
                "dedup_task_mb_per_doc": s["dedup_on"] * kept / ranges,
            },
            per_node=per_node,
            remedy="nodes with more memory per CPU (a key range holds up to "
            f"{DEDUP_PARTITION_DOCS:,} documents)",
        ),
        ProcessCost(
            "resolve task",
            {
                "resolve_task_mb": s["dedup_on"],
                "chain_task_mb": s["dedup_on"] * s["chain_on"],
                KNOWN: s["dedup_on"]
                * docs
                * s["duplicate_fraction"]
                * RESOLVE_BYTES_PER_DUPLICATE
                / MB,
            },
            remedy="a node with more memory (it holds the duplicate pairs)",
        ),
        ProcessCost(
            "shard task",
            {"shard_task_mb": 1, "chain_task_mb": s["chain_on"]},
            per_node=per_node,
            remedy="data.shard_mb",
        ),
    ]


def cost(s: dict[str, float]) -> StageCost:
    docs, cpus, kept = s["docs"], s["cpus"], s["docs"] * s["keep_fraction"]
    text_out = s["bytes"] * s["keep_fraction"]
    split_bytes = {"train": text_out * (1 - s["val_fraction"]), "val": text_out * s["val_fraction"]}
    shards = {
        k: max(1, math.ceil(v * TEXT_ZSTD_RATIO / (s["shard_mb"] * MB)))
        for k, v in split_bytes.items()
    }
    return StageCost(
        wall_s={
            "fixed_s": 1,
            "cpu_s_per_doc": docs / cpus,
            "cpu_s_per_byte": s["bytes"] / cpus,
            "filter_cpu_s_per_byte": s["chain_on"] * s["bytes"] / cpus,
        },
        store_bytes={"store_bytes_per_byte": s["bytes"]},
        processes=_processes(s),
        outputs={
            "docs_out": kept,
            "train_text_bytes": split_bytes["train"],
            "val_text_bytes": split_bytes["val"],
            "clean_shards": shards["train"] + shards["val"],
        },
        notes=[
            f"keeps {s['keep_fraction']:.0%} of documents (--keep-fraction), "
            f"{s['duplicate_fraction']:.0%} duplicates assumed"
        ],
    )
