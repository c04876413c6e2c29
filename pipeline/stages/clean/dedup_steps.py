"""`clean`'s document dedup steps: exact, then near duplicates (MinHash bands), as tasks over
key ranges of the read units' indexes on disk, then one `resolve` of the removals
(`pipeline/dedup/`); each task resumable by its marker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.stages.clean.unfinished_tasks import run_unfinished

if TYPE_CHECKING:
    from lmforge.pipeline.stages.clean.partition import CleanDirs

DEDUP_PARTITION_DOCS = 1_000_000
"""Documents per key range of a dedup task (a range of one band holds 16 bytes a document): a
corpus of at least this many documents gives every exact and near task about this many, so
their memory stays the same however big the corpus is."""


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
