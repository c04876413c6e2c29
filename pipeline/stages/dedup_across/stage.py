"""`dedup_across`: in a mixture, the documents of a source that repeat an earlier-listed source's.

Each source's `clean` deduplicated it on its own; this step, keyed by the sources it spans
(their clean keys and order) and `data.dedup`, finds what repeats across them, so adding a
source reruns it and not the sources' cleaning. One Ray task per clean shard hashes its
documents (exact hash, MinHash signature and band keys, the settings of `data.dedup`) into a
work directory; one task per key range decides, for the keys in its range, which copies go
(`pipeline/dedup/across.py`: the earlier-listed source keeps its copy); the coordinator gathers
the (removed, kept) pairs, which grow with the duplicates found, not with the corpus, and writes
one remove list per shard that loses documents, `removed/<source>/<shard>.npy` (sorted rows),
which that source's `tokenize` skips, and `duplicates.parquet` (each removed row with the copy
kept in its place).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.sources.data_config import DedupConfig
from lmforge.pipeline.storage.location import is_bucket
from lmforge.pipeline.typed_config import from_mapping

PARTITION_DOCS = 1_000_000
"""Documents per key range of a decision task (as `clean`'s dedup tasks)."""
SPLITS = ("train", "val")


def parse(sections: dict) -> DedupConfig:
    return from_mapping(DedupConfig, sections["data.dedup"], "data.dedup")


def asks_for_it(config: dict) -> bool:
    """A mixture runs the step unless `data.dedup.across` is false."""
    return bool(((config.get("data") or {}).get("dedup") or {}).get("across", True))


@dataclass(frozen=True, slots=True)
class Shard:
    """One clean shard of one source; its index is the first part of its documents' nodes
    (`index.node_of`)."""

    index: int
    rank: int
    source: str
    path: Any
    """The shard (an `ArtifactPath`: with a bucket, fetched by the task that reads it)."""
    name: str


def hash_shard(shard: Shard, cfg: DedupConfig, work: str) -> int:
    """Exact hashes, band keys and signatures of one shard's documents into `work`; returns
    its rows."""
    import pyarrow.parquet as pq

    from lmforge.pipeline.filters.dedup_exact import ExactDeduplicator
    from lmforge.pipeline.filters.minhash import lsh_band_keys, minhash_signatures

    texts = pq.read_table(os.fspath(shard.path), columns=["text"]).column(0).to_pylist()
    out = Path(work) / f"s{shard.index:06d}"
    out.mkdir(parents=True, exist_ok=True)
    if cfg.exact.enabled:
        hasher = ExactDeduplicator(cfg.exact)
        keys = np.array([hasher.text_hash(t) for t in texts], dtype=np.uint64)
        np.save(out / "exact.npy", keys)
    if cfg.near.enabled:
        signatures = minhash_signatures(texts, cfg.near)
        np.save(out / "signatures.npy", signatures)
        np.save(out / "bands.npy", lsh_band_keys(signatures, cfg.near))
    return len(texts)


def decide_range(
    shards: list[Shard], rows: list[int], cfg: DedupConfig, work: str, lo: int, hi: int, out: str
) -> int:
    """The (removed, kept) pairs of the keys in [lo, hi) of every shard into `out`; their count."""
    from lmforge.pipeline.dedup.across import (
        earlier_source_keeps,
        near_pairs,
        signature_agreement,
    )
    from lmforge.pipeline.dedup.index import node_of, split_node

    def gathered(name: str, column: int | None):
        keys, nodes, ranks = [], [], []
        for shard, n in zip(shards, rows, strict=True):
            if not n:
                continue
            array = np.load(Path(work) / f"s{shard.index:06d}" / name, mmap_mode="r")
            values = np.asarray(array if column is None else array[:, column])
            within = values >= np.uint64(lo)
            if hi < 1 << 64:
                within &= values < np.uint64(hi)
            inside = np.flatnonzero(within)
            keys.append(values[inside])
            nodes.append(node_of(shard.index, inside))
            ranks.append(np.full(inside.size, shard.rank, dtype=np.int64))
        if not keys:
            return (np.empty(0, np.uint64), np.empty(0, np.int64), np.empty(0, np.int64))
        return np.concatenate(keys), np.concatenate(nodes), np.concatenate(ranks)

    found = []
    if cfg.exact.enabled:
        found.append(earlier_source_keeps(*gathered("exact.npy", None)))
    if cfg.near.enabled:
        signatures = {
            u.index: np.load(Path(work) / f"s{u.index:06d}" / "signatures.npy", mmap_mode="r")
            for u, n in zip(shards, rows, strict=True)
            if n
        }

        def rows_of(nodes: np.ndarray) -> np.ndarray:
            shard, row = split_node(nodes)
            return np.stack([signatures[int(u)][int(r)] for u, r in zip(shard, row, strict=True)])

        def similar(pairs: np.ndarray) -> np.ndarray:
            if not pairs.size:
                return pairs
            agree = signature_agreement(rows_of(pairs[:, 0]), rows_of(pairs[:, 1]))
            return pairs[agree >= cfg.near.threshold]

        bands = []
        nodes = ranks = None
        for band in range(cfg.near.bands):
            keys, nodes, ranks = gathered("bands.npy", band)
            bands.append(keys)
        if nodes is not None:
            found.append(near_pairs(bands, nodes, ranks, similar))
    pairs = np.concatenate(found) if found else np.empty((0, 2), np.int64)
    np.save(out, pairs.astype(np.int64))
    return len(pairs)


@stage(
    name="dedup_across",
    inputs=("clean",),
    config=("data.dedup",),
    parse_config=parse,
    version="1",
    num_cpus=0,  # it drives the hashing and decision tasks
    in_mixture=asks_for_it,
    mixture_fields={},  # the sources' order: the earlier-listed keeps its copy
)
def dedup_across(ctx: StageContext) -> dict:
    import ray

    from lmforge.pipeline.dedup.across import first_kept, remove_list
    from lmforge.pipeline.dedup.index import key_ranges, split_node
    from lmforge.pipeline.sources.parquet_shards import shard_paths

    cfg: DedupConfig = ctx.config
    shards: list[Shard] = []
    for rank, (source, clean_dir) in enumerate(ctx.inputs_of("clean").items()):
        for split in SPLITS:
            for path in shard_paths(clean_dir, split):
                if not path.name.endswith("-canaries.parquet"):
                    shards.append(Shard(len(shards), rank, source, path, path.name))
    where = ctx.shared_location("work", "dedup_across", ctx.key)
    if is_bucket(where):
        raise LmforgeError(
            "dedup_across keeps its hashes in a shared directory, which a bucket store "
            "(cluster.store_uri) does not give it yet; set data.dedup.across=false"
        )
    work = Path(where)
    shutil.rmtree(work, ignore_errors=True)
    try:
        hasher = ray.remote(hash_shard).options(num_cpus=1)
        rows = ray.get([hasher.remote(u, cfg, str(work)) for u in shards])
        ranges = key_ranges(max(1, math.ceil(sum(rows) / PARTITION_DOCS)))
        decider = ray.remote(decide_range).options(num_cpus=1)
        outs = [str(work / f"pairs-{p:05d}.npy") for p in range(len(ranges))]
        ray.get(
            [
                decider.remote(shards, rows, cfg, str(work), lo, hi, out)
                for (lo, hi), out in zip(ranges, outs, strict=True)
            ]
        )
        pairs = first_kept(np.concatenate([np.load(o, allow_pickle=False) for o in outs]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    removed_shard, removed_row = split_node(pairs[:, 0])
    kept_shard, kept_row = split_node(pairs[:, 1])
    per_source = {
        s: {"docs": 0, "removed": 0} for s in dict.fromkeys(u.source for u in shards)
    }  # fmt: skip
    for shard, n in zip(shards, rows, strict=True):
        per_source[shard.source]["docs"] += n
        mine = np.sort(removed_row[removed_shard == shard.index])
        if mine.size:
            path = remove_list(ctx.out_dir, shard.source, shard.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, mine.astype(np.int64))
            per_source[shard.source]["removed"] += int(mine.size)
    _write_duplicates(ctx.out_dir, shards, removed_shard, removed_row, kept_shard, kept_row)
    for figures in per_source.values():
        figures["kept"] = figures["docs"] - figures["removed"]
    summary = {
        "sources": per_source,
        "removed": int(len(pairs)),
        "shards": len(shards),
        "key_ranges": len(ranges),
    }
    (ctx.out_dir / "dedup_across.json").write_text(json.dumps(summary, indent=2))
    ctx.tracker.log_metrics(
        {"removed": len(pairs), **{f"{s}/removed": f["removed"] for s, f in per_source.items()}}
    )
    return summary


def _write_duplicates(out_dir, shards, removed_shard, removed_row, kept_shard, kept_row) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def column(which: np.ndarray, attr: str) -> list:
        return [getattr(shards[int(u)], attr) for u in which]

    table = pa.table(
        {
            "source": column(removed_shard, "source"),
            "shard": column(removed_shard, "name"),
            "row": removed_row.astype(np.int64),
            "kept_source": column(kept_shard, "source"),
            "kept_shard": column(kept_shard, "name"),
            "kept_row": kept_row.astype(np.int64),
        }
    )
    pq.write_table(table, out_dir / "duplicates.parquet", compression="zstd")
