"""`clean`: raw sources -> normalised, filtered, deduplicated train/val zstd Parquet shards.

The driver streams documents from the sources and hands partitions to Ray tasks that run the
filter chain (`pipeline/filters/`) on every CPU of the cluster. Exact and MinHash near-duplicates
are then resolved globally from hashes alone, and each partition writes its share of the shards.
Every dropped document is recorded with its step and reason (`excluded/`), every removed
duplicate with the id kept in its place (`duplicates.parquet`), and the counts obey
documents in = documents kept + documents dropped, by reason.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from lmforge.pipeline.filters.document import Document
from lmforge.pipeline.sources.config import DataConfig
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.sources.files import SourceError, expand_paths, read_source
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping

log = logging.getLogger(__name__)


def parse(sections: dict) -> DataConfig:
    return from_mapping(DataConfig, sections["data"], "data")


def iter_documents(cfg: DataConfig, counts: Counter) -> Iterator[Document]:
    """All documents of all sources; unreadable files fail or are skipped per data.on_error.

    A file that breaks part-way (a bad line, a truncated or corrupt compressed stream) is skipped
    from where it breaks: the complete documents read before stay in the corpus (reading
    streams, nothing is held back to be undone) and are counted in `docs_before_file_errors`.
    """
    if not cfg.paths:
        yield from embedded_documents()
        return
    for path in expand_paths(cfg.paths):
        read = 0
        try:
            for doc in read_source(path, cfg.text_field, cfg.max_text_file_mb):
                read += 1
                yield doc
        except SourceError as exc:
            if cfg.on_error == "fail":
                raise
            log.warning("skipping a source: %s", exc)
            counts["files_skipped"] += 1
            counts["docs_before_file_errors"] += read


def partitions(cfg: DataConfig, counts: Counter) -> Iterator[list[Document]]:
    batch: list[Document] = []
    for doc in iter_documents(cfg, counts):
        if cfg.max_docs and counts["docs_in"] >= cfg.max_docs:
            break
        counts["docs_in"] += 1
        batch.append(doc)
        if len(batch) >= cfg.partition_docs:
            yield batch
            batch = []
    if batch:
        yield batch


def run_filter_partitions(cfg: DataConfig, parts_dir: Path, counts: Counter) -> list:
    """Phase 1 on Ray with bounded documents in flight; results in partition order."""
    import ray

    from lmforge.pipeline.filters.partition import filter_partition

    remote = ray.remote(filter_partition).options(num_cpus=1)
    max_in_flight = 2 * max(1, int(ray.available_resources().get("CPU", 1)))
    in_flight, results = [], []
    for index, batch in enumerate(partitions(cfg, counts)):
        in_flight.append(remote.remote(batch, cfg, index, str(parts_dir)))
        if len(in_flight) >= max_in_flight:
            done, in_flight = ray.wait(in_flight, num_returns=1)
            results += ray.get(done)
    results += ray.get(in_flight)
    return sorted(results, key=lambda r: r.index)


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
    parts_dir = ctx.out_dir / ".parts"
    parts_dir.mkdir()
    results = run_filter_partitions(cfg, parts_dir, counts)
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
