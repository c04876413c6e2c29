"""`clean`: raw sources -> normalised, filtered, deduplicated train/val zstd Parquet shards.

The coordinator only plans: it cuts the sources into read units (`sources/read_plan.py`) and Ray
tasks on every CPU of the cluster read them and run the filter chain (`pipeline/filters/`).
Exact and MinHash near-duplicates are then resolved globally from hashes alone, and each
partition writes its share of the shards.
Every dropped document is recorded with its step and reason (`excluded/`), every removed
duplicate with the id kept in its place (`duplicates.parquet`), and the counts obey
documents in = documents kept + documents dropped, by reason.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from lmforge.pipeline.cluster.process_stats import bytes_read, reset_peak_rss, task_peak_rss_bytes
from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.sources.files import check_paths_match
from lmforge.pipeline.sources.read_plan import (
    ReadUnit,
    count_line_starts,
    number_lines,
    plan_reads,
    ranges_to_count,
)
from lmforge.pipeline.stages.clean.unfinished_tasks import gather, recorded_result, run_unfinished
from lmforge.pipeline.stages.clean.work_dir import open_work_dir, plan_record
from lmforge.pipeline.typed_config import from_mapping

if TYPE_CHECKING:
    from lmforge.pipeline.stages.clean.partition import CleanDirs
    from lmforge.pipeline.storage.artifact_output import ArtifactOutput

log = logging.getLogger(__name__)

DEDUP_PARTITION_DOCS = 1_000_000
"""Documents per key range of a dedup task (a range of one band holds 16 bytes a document): a
corpus of at least this many documents gives every exact and near task about this many, so
their memory stays the same however big the corpus is."""


def parse(sections: dict) -> DataConfig:
    return from_mapping(DataConfig, sections["data"], "data")


UNKEYED = {"data.sources": [], "data.dedup.across": True}
"""`data` keys added after 0.1.0 that `clean` does not read (a mixture's instances see their own
source's paths): left out of its key at these values, which its instances' view sets."""


def for_source(config: dict, rank: int) -> dict:
    """The config as `clean[<source>]` reads it: the data group with the source's paths and text
    field and no mixture; canaries are planted in the first source only. Checks every source
    (a weight <= 0, a source with no paths: ValueError naming it)."""
    data = config["data"]
    source = parse({"data": data}).sources[rank]
    canaries = dict(data.get("canaries") or {})
    if rank:
        canaries["enabled"] = False
    view = {
        **data,
        "paths": list(source.paths),
        "text_field": source.text_field or data.get("text_field", "text"),
        "sources": [],
        "dedup": {**(data.get("dedup") or {}), "across": True},
        "canaries": canaries,
    }
    return {**config, "data": view}


def check_paths(cfg: DataConfig) -> None:
    """A run on a local runtime fails on a data path that matches no file before it starts
    anything (`StageSpec.local_check`)."""
    check_paths_match(list(cfg.paths))


def plan_units(cfg: DataConfig) -> list[ReadUnit]:
    """The read units, JSONL ranges numbered (sizes, footers and line counts: no document)."""
    units = plan_reads(cfg.paths, max(1, int(cfg.read_split_mb * 2**20)))
    return _with_line_numbers(units)


def filter_all_units(
    cfg: DataConfig, dirs: CleanDirs, output: ArtifactOutput, units: list[ReadUnit], counts: Counter
) -> list:
    """Phase 1: read and filter the units in Ray tasks, reusing those an interrupted run
    finished; results in unit order. Tasks in flight follow the cluster's CPUs as nodes come
    and go."""
    import ray

    from lmforge.pipeline.stages.clean.partition import FilteredPartition, filter_unit

    counts["read_units"] = len(units)
    remote = ray.remote(filter_unit).options(num_cpus=1)

    def recorded(unit: ReadUnit) -> FilteredPartition | None:
        record = recorded_result(dirs, dirs.filter_marker(unit.index), output)
        return None if record is None else FilteredPartition(**record)

    results: list[FilteredPartition] = []
    if cfg.max_docs:  # a cap in corpus order: each unit gets what the units before left over
        for unit in units:
            left = cfg.max_docs - sum(r.docs_in for r in results)
            if left <= 0:
                break
            step = run_unfinished(
                "filter",
                [unit],
                recorded,
                lambda unit, left=left: remote.remote(unit, cfg, dirs, output, left),
            )
            results += step.results
            counts["units_resumed"] += step.resumed
    else:
        step = run_unfinished(
            "filter",
            units,
            recorded,
            lambda unit: remote.remote(unit, cfg, dirs, output),
            in_flight=lambda: 2 * _cluster_cpus(),
        )
        results = step.results
        counts["units_resumed"] += step.resumed
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
    found = gather([remote.remote(p.path, p.start, p.end) for p in ranges])
    return number_lines(units, {(p.path, p.start): n for p, n in zip(ranges, found, strict=True)})


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def resolve_and_mark(
    marker: Path, dirs: CleanDirs, exact_files: list[str], edge_files: list[str]
) -> dict:
    """`resolve`, committing its marker as every task of the stage does."""
    from lmforge.pipeline.dedup.resolve import resolve

    result = resolve(dirs.index, exact_files, edge_files, dirs.removals, shared=dirs)
    dirs.mark_done(marker, result)
    return result


def deduplicate(
    cfg: DataConfig,
    dirs: CleanDirs,
    results: list,
    seconds: dict[str, float],
    resumed: dict[str, int],
) -> dict[str, list[dict]]:
    """Exact, then near duplicates, as tasks over key ranges of the units' indexes on disk;
    leaves one remove list per unit that loses documents (`pipeline/dedup/`); returns the peak
    memory of each step's tasks (those this run ran: `task_rss_stats` of each) and adds each
    step's wall seconds to `seconds` and its tasks an interrupted run finished to `resumed`."""
    import ray

    from lmforge.pipeline.dedup.exact import exact_partition
    from lmforge.pipeline.dedup.index import key_ranges
    from lmforge.pipeline.dedup.near import band_partition

    units = [r.index for r in results]
    total = sum(r.kept for r in results)
    peaks: dict[str, list[dict]] = {"exact": [], "near": [], "resolve": []}
    if not total or not (cfg.dedup.exact.enabled or cfg.dedup.near.enabled):
        return peaks
    ranges = key_ranges(max(1, -(-total // DEDUP_PARTITION_DOCS)))
    work = Path(dirs.removals)

    def written(out: str) -> str | None:
        """An exact or near task's marker is its output file (whole or absent): it records
        nothing else, so only this run's tasks report their memory."""
        return out if dirs.exists(out) else None

    exact_files: list[str] = []
    started = time.perf_counter()
    if cfg.dedup.exact.enabled:
        exact = {str(work / f"exact-{p:05d}.npy"): lo_hi for p, lo_hi in enumerate(ranges)}
        exact_files = list(exact)
        exact_task = ray.remote(exact_partition).options(num_cpus=1)
        step = run_unfinished(
            "exact",
            exact_files,
            written,
            lambda out: exact_task.remote(dirs.index, units, *exact[out], out, shared=dirs),
        )
        peaks["exact"], resumed["exact"] = step.ran, step.resumed
    seconds["exact"], started = time.perf_counter() - started, time.perf_counter()
    edge_files: list[str] = []
    if cfg.dedup.near.enabled:
        near = {
            str(work / f"edges-b{band:03d}-{p:05d}.npy"): (band, lo, hi)
            for band in range(cfg.dedup.near.bands)
            for p, (lo, hi) in enumerate(ranges)
        }
        edge_files = list(near)
        band_task = ray.remote(band_partition).options(num_cpus=1)
        threshold = cfg.dedup.near.threshold
        step = run_unfinished(
            "near",
            edge_files,
            written,
            lambda out: band_task.remote(
                dirs.index, units, *near[out], exact_files, threshold, out, shared=dirs
            ),
        )
        peaks["near"], resumed["near"] = step.ran, step.resumed
    seconds["near"], started = time.perf_counter() - started, time.perf_counter()
    resolve_task = ray.remote(resolve_and_mark).options(num_cpus=1)
    step = run_unfinished(
        "resolve",
        [dirs.resolve_marker()],
        dirs.done_result,
        lambda marker: resolve_task.remote(marker, dirs, exact_files, edge_files),
    )
    peaks["resolve"], resumed["resolve"] = step.results, step.resumed
    seconds["resolve"] = time.perf_counter() - started
    return peaks


@stage(
    name="clean",
    config=("data",),
    parse_config=parse,
    version="4",  # 4: paragraph dedup (data.dedup.paragraph), on by default
    num_cpus=0,
    local_check=check_paths,
    unkeyed=UNKEYED,
    per_source=True,
    for_source=for_source,
)
def clean(ctx: StageContext) -> dict:
    import ray

    from lmforge.pipeline.filters.base import FilterCounts
    from lmforge.pipeline.filters.chain import dropped_by_reason, merge_chain_counts
    from lmforge.pipeline.sources.datasheet import write_datasheet
    from lmforge.pipeline.stages.clean.paragraph_step import (
        count_repeated_units,
        paragraph_summary,
    )
    from lmforge.pipeline.stages.clean.partition import split_unit
    from lmforge.pipeline.stages.clean.shard_output import (
        plan_shards,
        shard_description,
        write_shard,
    )

    cfg: DataConfig = ctx.config
    counts: Counter = Counter()
    read_at_start = bytes_read()
    reset_peak_rss()  # this stage may run in a reused Ray worker
    units = plan_units(cfg)
    dirs = open_work_dir(ctx, plan_record(units))
    started = time.perf_counter()
    results = filter_all_units(cfg, dirs, ctx.output, units, counts)
    seconds = {"filter": time.perf_counter() - started}
    dedup_resumed: dict[str, int] = {}
    peaks = {
        "filter": [asdict(r) for r in results],
        **deduplicate(cfg, dirs, results, seconds, dedup_resumed),
    }
    paragraph_files, peaks["paragraph"] = count_repeated_units(
        cfg, dirs, results, seconds, dedup_resumed
    )
    started = time.perf_counter()
    split_task = ray.remote(split_unit).options(num_cpus=1)
    split = run_unfinished(
        "split",
        [r.index for r in results],
        lambda i: recorded_result(dirs, dirs.split_marker(i), ctx.output),
        lambda i: split_task.remote(i, cfg, dirs, ctx.output, paragraph_files),
    ).results
    written = {r.index: part for r, part in zip(results, split, strict=True)}
    seconds["split"], started = time.perf_counter() - started, time.perf_counter()
    plans = plan_shards(
        {i: part["groups"] for i, part in written.items()}, max(1, int(cfg.shard_mb * 2**20))
    )
    shard_task = ray.remote(write_shard).options(num_cpus=1)
    copied = run_unfinished(
        "shard",
        plans,
        lambda plan: recorded_result(dirs, dirs.shard_marker(plan.name), ctx.output),
        lambda plan: shard_task.remote(plan, dirs, ctx.output),
    ).results
    peaks["shard"] = copied
    seconds["shard"] = time.perf_counter() - started
    peaks["split"] = split
    shards = [shard_description(plan) for plan in plans]
    ctx.add_files(
        [e for r in results for e in r.files]
        + [e for w in written.values() for e in w["files"]]
        + [c["file"] for c in copied]
    )
    dirs.remove()
    steps = merge_chain_counts(
        [{k: FilterCounts.from_dict(v) for k, v in r.counts.items()} for r in results]
    )
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
    canary_docs = 0
    if cfg.canaries.enabled:
        from lmforge.pipeline.stages.clean.canaries import plant_canaries

        canary_docs = plant_canaries(cfg, ctx.out_dir)
        shards.append({"file": "train-canaries.parquet", "split": "train", "rows": canary_docs})
    # The largest dedup process's peak memory.
    dedup_steps = ("exact", "near", "resolve", "paragraph")
    dedup_peak = max(
        [t["peak_rss_bytes"] for step in dedup_steps for t in peaks[step]],
        default=0,
    )
    summary = {
        "docs_in": counts["docs_in"],
        "docs_out": docs_out,
        "train_docs": rows["train"],
        "val_docs": rows["val"],
        "files_skipped": counts["files_skipped"],
        "docs_before_file_errors": counts["docs_before_file_errors"],
        "canary_docs": canary_docs,
        "read_units": counts["read_units"],
        # What the plan sized the read units by (compressed files at an estimated ratio).
        "planned_read_bytes": sum(piece.size for unit in units for piece in unit.pieces),
        "units_resumed": counts["units_resumed"],
        # Dedup tasks an interrupted run had finished, by step (their outputs were reused).
        "dedup_tasks_resumed": dedup_resumed,
        "read_nodes": len({r.node_id for r in results}),
        "coordinator_read_mb": _mb_since(read_at_start, bytes_read()),
        "dropped_by_reason": reasons,
        # Lines or paragraphs repeated across documents, taken out (data.dedup.paragraph).
        "paragraph_dedup": paragraph_summary(results, peaks["paragraph"], split),
        "coordinator_peak_rss_mb": round(task_peak_rss_bytes() / 2**20, 1),
        "task_peak_rss_mb": _largest_mb(peaks, lambda t: t["peak_rss_bytes"]),
        # The same less what the task's (reused) worker held when it started.
        "task_rss_rise_mb": _largest_mb(
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
    write_datasheet(ctx.out_dir / "datasheet.md", cfg, summary)
    for split in ("train", "val"):
        ctx.tracker.log_dataset(ctx.final_dir, f"clean-{split}", ctx.key, context=split)
    ctx.tracker.log_artifact(ctx.out_dir / "datasheet.md")
    ctx.tracker.log_metrics(
        {
            "docs_in": counts["docs_in"],
            "docs_out": docs_out,
            **{f"dropped_{k}": v for k, v in reasons.items()},
            **{f"step_seconds_{k}": v for k, v in seconds.items()},
            **{
                f"paragraph_dedup_{k}": v
                for k, v in summary["paragraph_dedup"].items()
                if k != "cpu_seconds"
            },
        }
    )
    return summary


def _largest_mb(tasks: dict[str, list[dict]], of) -> dict[str, float]:
    """{step: the largest `of(task)` over the step's tasks, in MB}."""
    return {k: round(max(map(of, v), default=0) / 2**20, 1) for k, v in tasks.items()}


def _mb_since(start: int | None, end: int | None) -> float | None:
    return None if start is None or end is None else round((end - start) / 2**20, 3)
