"""Output shards of a target size, cut across read units: `clean`'s last step.

Each unit's kept documents sit in small row groups (`partition.split_unit`); `plan_shards` walks
them in corpus order and closes a shard where its compressed size comes nearest `data.shard_mb`, so
shard sizes do not depend on how the corpus was cut into tasks; `write_shard` (a task) copies its
row groups into one file of the artifact.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from lmforge.pipeline.cluster.process_stats import reset_peak_rss, task_rss_stats
from lmforge.pipeline.sources.parquet_shards import SCHEMA
from lmforge.pipeline.stages.clean.partition import CleanDirs, kept_path
from lmforge.pipeline.storage.artifact_output import ArtifactOutput


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """One output shard: its file name and the (unit, row groups) it copies, in order."""

    name: str
    split: str
    groups: tuple[tuple[int, tuple[int, ...]], ...]
    rows: int
    estimated_bytes: int


def plan_shards(
    groups_by_unit: dict[int, dict[str, list[tuple[int, int]]]], target_bytes: int
) -> list[ShardPlan]:
    """Shards of each split, from every unit's row groups as (rows, compressed bytes)."""
    plans: list[ShardPlan] = []
    for split in ("train", "val"):
        runs: list[list[tuple[int, int, int, int]]] = [[]]  # (unit, group, rows, bytes)
        size = 0
        for unit in sorted(groups_by_unit):
            for group, (rows, nbytes) in enumerate(groups_by_unit[unit].get(split, [])):
                if runs[-1] and size + nbytes / 2 > target_bytes:  # nearer the target without
                    runs.append([])
                    size = 0
                runs[-1].append((unit, group, rows, nbytes))
                size += nbytes
        for number, run in enumerate(r for r in runs if r):
            by_unit: dict[int, list[int]] = {}
            for unit, group, _, _ in run:
                by_unit.setdefault(unit, []).append(group)
            plans.append(
                ShardPlan(
                    name=f"{split}-{number:05d}.parquet",
                    split=split,
                    groups=tuple((u, tuple(g)) for u, g in by_unit.items()),
                    rows=sum(g[2] for g in run),
                    estimated_bytes=sum(g[3] for g in run),
                )
            )
    return plans


def shard_description(plan: ShardPlan) -> dict:
    return {"file": plan.name, "split": plan.split, "rows": plan.rows}


def write_shard(plan: ShardPlan, dirs: CleanDirs, output: ArtifactOutput) -> dict:
    """Copy the plan's row groups into the artifact's `<name>` (straight into the store, where
    it exists only once whole); marks the task done with the file's manifest entry and the
    task's peak resident memory, which it returns."""
    reset_peak_rss()
    with (
        output.open(plan.name) as target,
        pq.ParquetWriter(target, SCHEMA, compression="zstd") as writer,
    ):
        for unit, groups in plan.groups:
            source = pq.ParquetFile(dirs.fetch(kept_path(dirs.parts, unit, plan.split)))
            for group in groups:
                writer.write_table(source.read_row_group(group), row_group_size=1 << 30)
    result = {"file": target.entry, **task_rss_stats()}
    dirs.mark_done(dirs.shard_marker(plan.name), result)
    return result
