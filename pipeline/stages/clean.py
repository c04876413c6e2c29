"""`clean`: raw sources -> normalised, filtered, deduplicated train/val zstd Parquet shards.

The driver only plans: it cuts the sources into read units (`sources/read_plan.py`) and Ray
tasks on every CPU of the cluster read them and run the filter chain (`pipeline/filters/`).
Exact and MinHash near-duplicates are then resolved globally from hashes alone, and each
partition writes its share of the shards.
Every dropped document is recorded with its step and reason (`excluded/`), every removed
duplicate with the id kept in its place (`duplicates.parquet`), and the counts obey
documents in = documents kept + documents dropped, by reason.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from pathlib import Path

import numpy as np

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.proc_stats import bytes_read
from lmforge.pipeline.sources.config import DataConfig
from lmforge.pipeline.sources.read_plan import (
    ReadUnit,
    count_line_starts,
    number_lines,
    plan_reads,
    ranges_to_count,
)
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping

log = logging.getLogger(__name__)


def parse(sections: dict) -> DataConfig:
    return from_mapping(DataConfig, sections["data"], "data")


def filter_all_units(cfg: DataConfig, parts_dir: Path, counts: Counter) -> list:
    """Phase 1: plan read units here (sizes and footers only), read and filter them in Ray tasks;
    results in unit order. Tasks in flight follow the cluster's CPUs as nodes come and go."""
    import ray

    from lmforge.pipeline.filters.partition import filter_unit

    units = plan_reads(cfg.paths, max(1, int(cfg.read_split_mb * 2**20)))
    units = _with_line_numbers(units)
    counts["read_units"] = len(units)
    remote = ray.remote(filter_unit).options(num_cpus=1)
    results = []
    if cfg.max_docs:  # a cap in corpus order: each unit gets what the units before left over
        for unit in units:
            left = cfg.max_docs - sum(r.docs_in for r in results)
            if left <= 0:
                break
            results += _get([remote.remote(unit, cfg, str(parts_dir), left)])
    else:
        in_flight: list = []
        for unit in units:
            while len(in_flight) >= 2 * _cluster_cpus():
                done, in_flight = ray.wait(in_flight, num_returns=1)
                results += _get(done)
            in_flight.append(remote.remote(unit, cfg, str(parts_dir)))
        results += _get(in_flight)
    for r in results:
        counts["docs_in"] += r.docs_in
        counts["docs_before_file_errors"] += r.docs_before_file_errors
    counts["files_skipped"] = len({p for r in results for p in r.skipped_files})
    return sorted(results, key=lambda r: r.index)


def _with_line_numbers(units: list[ReadUnit]) -> list[ReadUnit]:
    """Count the line starts of the byte ranges of big JSONL files in tasks, so each range's
    documents get the `<file>#<line>` ids of a whole read."""
    import ray

    ranges = ranges_to_count(units)
    if not ranges:
        return units
    remote = ray.remote(count_line_starts).options(num_cpus=1)
    found = _get([remote.remote(p.path, p.start, p.end) for p in ranges])
    return number_lines(units, {(p.path, p.start): n for p, n in zip(ranges, found, strict=True)})


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _get(refs: list) -> list:
    """ray.get, raising a task's own lmforge error (a bad source file) as it is."""
    import ray

    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, LmforgeError):
            raise exc.cause from None
        raise


def resolve_duplicates(cfg: DataConfig, results: list) -> dict[str, tuple[str, str]]:
    """removed id -> (kept id, kind), exact first, then near among the remaining documents."""
    from lmforge.pipeline.filters.dedup_exact import resolve_exact_duplicates
    from lmforge.pipeline.filters.minhash import near_duplicate_clusters

    ids = [i for r in results for i in r.ids]
    removed: dict[str, tuple[str, str]] = {}
    if cfg.dedup.exact.enabled and ids:
        hashes = np.concatenate([r.exact_hashes for r in results])
        _, exact = resolve_exact_duplicates(zip(ids, hashes.tolist(), strict=True))
        removed.update({rid: (kid, "exact_duplicate") for rid, kid in exact.items()})
    if cfg.dedup.near.enabled and ids:
        keep = np.array([i not in removed for i in ids])
        bands = np.concatenate([r.band_keys for r in results])[keep]
        sigs = np.concatenate([r.signatures for r in results])[keep]
        kept_ids = [i for i, k in zip(ids, keep, strict=True) if k]
        near = near_duplicate_clusters(kept_ids, bands, sigs, cfg.dedup.near)
        removed.update({rid: (kid, "near_duplicate") for rid, kid in near.items()})
    return removed


@stage(name="clean", config=("data",), parse_config=parse, version="2", num_cpus=0)
def clean(ctx: StageContext) -> dict:
    import ray

    from lmforge.pipeline.filters.base import FilterCounts
    from lmforge.pipeline.filters.chain import dropped_by_reason, merge_chain_counts
    from lmforge.pipeline.filters.minhash import index_bytes_per_document
    from lmforge.pipeline.filters.partition import shard_partition
    from lmforge.pipeline.sources.datasheet import write_datasheet, write_duplicates, write_excluded

    cfg: DataConfig = ctx.config
    counts: Counter = Counter()
    read_at_start = bytes_read()
    parts_dir = ctx.out_dir / ".parts"
    parts_dir.mkdir()
    results = filter_all_units(cfg, parts_dir, counts)
    removed = resolve_duplicates(cfg, results)
    remote = ray.remote(shard_partition).options(num_cpus=1)
    removed_ids = ray.put(set(removed))
    shards = [
        s
        for part in ray.get(
            [
                remote.remote(str(parts_dir), r.index, removed_ids, cfg, str(ctx.out_dir))
                for r in results
            ]
        )
        for s in part
    ]
    write_excluded(parts_dir, ctx.out_dir / "excluded.parquet")
    write_duplicates(removed, ctx.out_dir / "duplicates.parquet")
    shutil.rmtree(parts_dir)
    steps = merge_chain_counts(
        [{k: FilterCounts.from_dict(v) for k, v in r.counts.items()} for r in results]
    )
    reasons = dropped_by_reason(steps)
    for _, kind in removed.values():
        reasons[kind] = reasons.get(kind, 0) + 1
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
    canary_docs = 0
    if cfg.canaries.enabled:
        canary_docs = plant_canaries(cfg, ctx.out_dir)
        shards.append({"file": "train-canaries.parquet", "split": "train", "rows": canary_docs})
    summary = {
        "docs_in": counts["docs_in"],
        "docs_out": docs_out,
        "train_docs": rows["train"],
        "val_docs": rows["val"],
        "files_skipped": counts["files_skipped"],
        "docs_before_file_errors": counts["docs_before_file_errors"],
        "canary_docs": canary_docs,
        "read_units": counts["read_units"],
        "coordinator_read_mb": _mb_since(read_at_start, bytes_read()),
        "dropped_by_reason": reasons,
        "dedup_index_bytes_per_doc": 8
        + (index_bytes_per_document(cfg.dedup.near) if cfg.dedup.near.enabled else 0),
        "filters": {name: c.to_dict() for name, c in steps.items()},
        "shards": shards,
    }
    write_datasheet(ctx.out_dir / "datasheet.md", cfg, summary)
    for split in ("train", "val"):
        ctx.tracker.log_dataset(ctx.final_dir, f"clean-{split}", ctx.key, context=split)
    ctx.tracker.log_artifact(ctx.out_dir / "datasheet.md")
    ctx.tracker.log_metrics(
        {
            "docs_in": counts["docs_in"],
            "docs_out": docs_out,
            **{f"dropped_{k}": v for k, v in reasons.items()},
        }
    )
    return summary


def _mb_since(start: int | None, end: int | None) -> float | None:
    return None if start is None or end is None else round((end - start) / 2**20, 3)


def plant_canaries(cfg: DataConfig, out_dir: Path) -> int:
    """Write each canary `repeats` times as train documents; record them for `harm`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lmforge.pipeline.probes.memorisation import canaries_to_records, make_canaries
    from lmforge.pipeline.sources.parquet_shards import SCHEMA

    c = cfg.canaries
    canaries = make_canaries(c.per_repeat, c.seed, repeats=tuple(c.repeats), digits=c.digits)
    rows = [
        {
            "id": f"canary/{k.secret}/{copy}",
            "text": k.text,
            "source": "canary",
            "meta": "{}",
            "n_chars": len(k.text),
            "lang": "",
            "split": "train",
        }
        for k in canaries
        for copy in range(k.repeats)
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=SCHEMA),
        out_dir / "train-canaries.parquet",
        compression="zstd",
    )
    (out_dir / "canaries.json").write_text(json.dumps(canaries_to_records(canaries), indent=2))
    return len(rows)
