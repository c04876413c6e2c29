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
from lmforge.pipeline.stages.clean.dedup_steps import deduplicate
from lmforge.pipeline.stages.clean.summary import (
    chain_counts,
    clean_summary,
    kept_and_dropped,
    mb_since,
    tracked_metrics,
)
from lmforge.pipeline.stages.clean.unfinished_tasks import gather, recorded_result, run_unfinished
from lmforge.pipeline.stages.clean.work_dir import open_work_dir, plan_record
from lmforge.pipeline.typed_config import from_mapping

if TYPE_CHECKING:
    from lmforge.pipeline.stages.clean.partition import CleanDirs
    from lmforge.pipeline.storage.artifact_output import ArtifactOutput

log = logging.getLogger(__name__)


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
    steps = chain_counts(results)
    reasons, rows = kept_and_dropped(counts, steps, written, shards)
    canary_docs = 0
    if cfg.canaries.enabled:
        from lmforge.pipeline.stages.clean.canaries import plant_canaries

        canary_docs = plant_canaries(cfg, ctx.out_dir)
        shards.append({"file": "train-canaries.parquet", "split": "train", "rows": canary_docs})
    summary = clean_summary(
        counts=counts,
        results=results,
        steps=steps,
        rows=rows,
        reasons=reasons,
        peaks=peaks,
        seconds=seconds,
        planned_read_bytes=sum(piece.size for unit in units for piece in unit.pieces),
        dedup_resumed=dedup_resumed,
        coordinator_read_mb=mb_since(read_at_start, bytes_read()),
        coordinator_peak_rss_bytes=task_peak_rss_bytes(),
        paragraph_dedup=paragraph_summary(results, peaks["paragraph"], split),
        canary_docs=canary_docs,
        shards=shards,
    )
    write_datasheet(ctx.out_dir / "datasheet.md", cfg, summary)
    for split_name in ("train", "val"):
        ctx.tracker.log_dataset(ctx.final_dir, f"clean-{split_name}", ctx.key, context=split_name)
    ctx.tracker.log_artifact(ctx.out_dir / "datasheet.md")
    ctx.tracker.log_metrics(tracked_metrics(summary, seconds))
    return summary
