"""`clean`'s paragraph dedup step: the unit hashes of the documents kept by the exact and near
steps, counted as Ray tasks over ranges of the hash space (`pipeline/dedup/paragraph.py`); each
task's output file is its completion marker (written whole or not at all), so a rerun of the
same plan redoes only the ranges an interrupted run left. The split step applies the result."""

from __future__ import annotations

import time

from lmforge.pipeline.dedup.index import key_ranges
from lmforge.pipeline.dedup.paragraph import paragraph_partition
from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.stages.clean.paragraph_removal import paragraph_files_of
from lmforge.pipeline.stages.clean.partition import CleanDirs, FilteredPartition
from lmforge.pipeline.stages.clean.unfinished_tasks import run_unfinished


def count_repeated_units(
    cfg: DataConfig,
    dirs: CleanDirs,
    results: list[FilteredPartition],
    seconds: dict[str, float],
    resumed: dict[str, int],
) -> tuple[list[str], list[dict]]:
    """(the counting tasks' output files, what the tasks this run ran returned); adds the step's
    wall seconds to `seconds` and the tasks an interrupted run finished to `resumed`."""
    import ray

    started = time.perf_counter()
    settings = cfg.dedup.paragraph
    pairs = sum(r.paragraph_units for r in results)
    seconds["paragraph"], resumed["paragraph"] = 0.0, 0
    if not settings.enabled or not pairs:
        return [], []
    ranges = key_ranges(max(1, -(-pairs // settings.units_per_task)))
    files = paragraph_files_of(dirs.removals, len(ranges))
    bounds = dict(zip(files, ranges, strict=True))
    units = [r.index for r in results]
    task = ray.remote(paragraph_partition).options(num_cpus=1)
    step = run_unfinished(
        "paragraph",
        files,
        lambda out: out if dirs.exists(out) else None,
        lambda out: task.remote(
            dirs.index, units, *bounds[out], settings.min_docs, dirs.removals, out, shared=dirs
        ),
    )
    seconds["paragraph"] = time.perf_counter() - started
    resumed["paragraph"] = step.resumed
    return files, step.ran


def paragraph_summary(
    results: list[FilteredPartition], counted: list[dict], split: list[dict]
) -> dict:
    """The step's counts over the stage: units, characters and documents it touched, and the
    CPU seconds of its three parts (hashing in the filter tasks, counting, removing)."""
    totals = {"units_removed": 0, "chars_removed": 0, "docs_touched": 0, "docs_dropped": 0}
    for part in split:
        for name in totals:
            totals[name] += part.get("paragraph", {}).get(name, 0)
    cpu = (
        sum(r.paragraph_cpu_seconds for r in results)
        + sum(t["cpu_seconds"] for t in counted)
        + sum(p.get("paragraph", {}).get("cpu_seconds", 0.0) for p in split)
    )
    return {
        **totals,
        "unit_hashes": sum(r.paragraph_units for r in results),
        "cpu_seconds": round(cpu, 3),
    }
