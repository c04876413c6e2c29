"""What `clean` says of a run once its shards are written: the documents kept and dropped (and
that they add up), its summary (counts, memory, timings, shards), and the figures MLflow gets."""

from __future__ import annotations

from collections import Counter
from typing import Any

DEDUP_STEPS = ("exact", "near", "resolve", "paragraph")


def chain_counts(results: list) -> dict[str, Any]:
    """Each filter's counts (`FilterCounts`) over every read unit."""
    from lmforge.pipeline.filters.base import FilterCounts
    from lmforge.pipeline.filters.chain import merge_chain_counts

    return merge_chain_counts(
        [{k: FilterCounts.from_dict(v) for k, v in r.counts.items()} for r in results]
    )


def kept_and_dropped(
    counts: Counter, steps: dict[str, Any], written: dict[int, dict], shards: list[dict]
) -> tuple[dict[str, int], dict[str, int]]:
    """(documents dropped by reason, rows per split), checked: every document read is kept or
    dropped, and neither split is empty. `steps`: `chain_counts`."""
    from lmforge.pipeline.filters.chain import dropped_by_reason

    reasons = dropped_by_reason(steps)
    for part in written.values():
        for kind, n in part["removed"].items():
            if n:
                reasons[kind] = reasons.get(kind, 0) + n
    rows = {s: sum(x["rows"] for x in shards if x["split"] == s) for s in ("train", "val")}
    docs_out = rows["train"] + rows["val"]
    if counts["docs_in"] != docs_out + sum(reasons.values()):
        raise RuntimeError(
            f"document conservation broken: {counts['docs_in']} in, "
            f"{docs_out} kept, {reasons} dropped"
        )
    if docs_out == 0 or rows["val"] == 0 or rows["train"] == 0:
        raise ValueError(
            f"the corpus is empty or a split is empty after cleaning ({counts['docs_in']} read, "
            f"train={rows['train']}, val={rows['val']}, dropped {reasons}); check data.paths, the "
            "filter thresholds (data.filters.*) and data.val_fraction"
        )
    return reasons, rows


def clean_summary(
    *,
    counts: Counter,
    results: list,
    steps: dict[str, Any],
    rows: dict[str, int],
    reasons: dict[str, int],
    peaks: dict[str, list[dict]],
    seconds: dict[str, float],
    planned_read_bytes: int,
    dedup_resumed: dict[str, int],
    coordinator_read_mb: float | None,
    coordinator_peak_rss_bytes: int,
    paragraph_dedup: dict[str, Any],
    canary_docs: int,
    shards: list[dict],
) -> dict[str, Any]:
    """The stage's summary (its manifest's, the datasheet's and `status`'s figures)."""
    # The largest dedup process's peak memory.
    dedup_peak = max(
        [t["peak_rss_bytes"] for step in DEDUP_STEPS for t in peaks[step]],
        default=0,
    )
    return {
        "docs_in": counts["docs_in"],
        "docs_out": rows["train"] + rows["val"],
        "train_docs": rows["train"],
        "val_docs": rows["val"],
        "files_skipped": counts["files_skipped"],
        "docs_before_file_errors": counts["docs_before_file_errors"],
        "canary_docs": canary_docs,
        "read_units": counts["read_units"],
        # What the plan sized the read units by (compressed files at an estimated ratio).
        "planned_read_bytes": planned_read_bytes,
        "units_resumed": counts["units_resumed"],
        # Dedup tasks an interrupted run had finished, by step (their outputs were reused).
        "dedup_tasks_resumed": dedup_resumed,
        "read_nodes": len({r.node_id for r in results}),
        "coordinator_read_mb": coordinator_read_mb,
        "dropped_by_reason": reasons,
        # Lines or paragraphs repeated across documents, taken out (data.dedup.paragraph).
        "paragraph_dedup": paragraph_dedup,
        "coordinator_peak_rss_mb": round(coordinator_peak_rss_bytes / 2**20, 1),
        "task_peak_rss_mb": largest_mb(peaks, lambda t: t["peak_rss_bytes"]),
        # The same less what the task's (reused) worker held when it started.
        "task_rss_rise_mb": largest_mb(
            peaks, lambda t: t["peak_rss_bytes"] - t.get("start_rss_bytes", 0)
        ),
        "dedup_peak_rss_mb": round(dedup_peak / 2**20, 1),
        # The same over the documents deduplicated: no process holds state for every document,
        # so this falls as the corpus grows.
        "dedup_index_bytes_per_doc": round(dedup_peak / max(1, sum(r.kept for r in results))),
        # Wall seconds of each step in this run (a step an interrupted run finished: ~0).
        "step_seconds": {step: round(t, 2) for step, t in seconds.items()},
        "filters": {name: c.to_dict() for name, c in steps.items()},
        "shards": shards,
    }


def tracked_metrics(summary: dict[str, Any], seconds: dict[str, float]) -> dict[str, float]:
    """The figures of the summary MLflow gets as metrics."""
    return {
        "docs_in": summary["docs_in"],
        "docs_out": summary["docs_out"],
        **{f"dropped_{k}": v for k, v in summary["dropped_by_reason"].items()},
        **{f"step_seconds_{k}": v for k, v in seconds.items()},
        **{
            f"paragraph_dedup_{k}": v
            for k, v in summary["paragraph_dedup"].items()
            if k != "cpu_seconds"
        },
    }


def largest_mb(tasks: dict[str, list[dict]], of) -> dict[str, float]:
    """{step: the largest `of(task)` over the step's tasks, in MB}."""
    return {k: round(max(map(of, v), default=0) / 2**20, 1) for k, v in tasks.items()}


def mb_since(start: int | None, end: int | None) -> float | None:
    return None if start is None or end is None else round((end - start) / 2**20, 3)
