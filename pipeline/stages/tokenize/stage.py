"""`tokenize`: encode the clean shards in parallel Ray tasks into memory-mappable token shards.

Consecutive clean Parquet shards are grouped until their estimated tokens reach
`tokenizer.shard_mb` (small clean shards are merged; `0` keeps one token shard per clean shard),
and each group is one task that writes one token shard (`<|endoftext|>` before every document,
the convention of `lmforge.tokenizer.convention`). When every task is done, the coordinator writes
each split's index (`lmforge.tokenizer.split_index`) from the tasks' small summaries, so readers
open a split without opening its shards. Windows of block_size+1 are cut at training time, so
this stage does not depend on the model's block size.

Each task, on whatever node it lands, reads its clean shards and the tokenizer itself (from a
bucket: through that node's cache), writes its token shard in a local scratch directory and puts
the files into the store through `ctx.output`; only counts and the files' manifest entries come
back to the coordinator, which reads nothing but the clean shards' Parquet footers.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.cluster.placement import spread_strategies
from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.sources.parquet_shards import shard_paths
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.input_artifact import ArtifactPath
from lmforge.pipeline.typed_config import from_mapping

DEFAULT_BYTES_PER_TOKEN = 4.0
"""Text bytes per token assumed when the tokenizer's summary does not give it."""


@dataclass(kw_only=True, slots=True)
class TokenizeConfig:
    shard_mb: float = 256.0
    """Target size of a token shard's tokens file in MB (estimated from the clean shards' text);
    0 writes one token shard per clean shard."""

    def __post_init__(self) -> None:
        if self.shard_mb < 0:
            raise ValueError(
                f"tokenizer.shard_mb must be >= 0 (0: no merging), got {self.shard_mb}"
            )


def parse(sections: dict) -> TokenizeConfig:
    return from_mapping(TokenizeConfig, {"shard_mb": sections["tokenizer.shard_mb"]}, "tokenizer")


def group_shards(sizes: Sequence[int], target: float) -> list[list[int]]:
    """Consecutive runs of shards, each closed before it would pass `target` (a shard larger than
    `target` stands alone); `target` 0 gives one run per shard."""
    groups: list[list[int]] = []
    total = 0
    for k, size in enumerate(sizes):
        if groups and target > 0 and total + size <= target:
            groups[-1].append(k)
            total += size
        else:
            groups.append([k])
            total = size
    return groups


def text_bytes(parquet_path: ArtifactPath) -> int:
    """Uncompressed bytes of a clean shard's `text` column, from its Parquet footer (from a
    bucket: the footer's blocks only)."""
    import pyarrow.parquet as pq

    ranged = getattr(parquet_path, "open_ranged", None)
    if ranged is None:
        meta = pq.read_metadata(parquet_path)
    else:
        with ranged() as source:
            meta = pq.read_metadata(source)
    column = meta.schema.names.index("text")
    return sum(
        meta.row_group(g).column(column).total_uncompressed_size for g in range(meta.num_row_groups)
    )


def _tokenize_group(
    tokenizer_dir,
    clean_dir,
    names: list[str],
    output: ArtifactOutput,
    split: str,
    index: int,
    skip: SkipRows | None = None,
) -> dict:
    import pyarrow.parquet as pq

    from lmforge.tokenizer.partition import tokenize_partition

    text_bytes = 0
    skipped = 0

    def texts():
        nonlocal text_bytes, skipped
        for name in names:
            parquet = pq.ParquetFile(os.fspath(clean_dir / name))
            gone = set(skip.rows(name).tolist()) if skip is not None else set()
            row = 0
            for batch in parquet.iter_batches(batch_size=1024, columns=["text"]):
                for text in batch.column(0).to_pylist():
                    row += 1
                    if row - 1 in gone:
                        skipped += 1
                        continue
                    text_bytes += len(text.encode("utf-8"))
                    yield text

    with tempfile.TemporaryDirectory(prefix="lmforge-tokenize-") as scratch:
        info = tokenize_partition(os.fspath(tokenizer_dir), texts(), scratch, split, index)
        files = [output.put(path, path.name) for path in sorted(Path(scratch).iterdir())]
    return {
        "info": info,
        "text_bytes": text_bytes,
        "skipped": skipped,
        "files": files,
        "node": _node_id(),
    }


@dataclass(frozen=True, slots=True)
class SkipRows:
    """In a mixture, the rows of this source's clean shards that the cross-source dedup
    removed (its artifact, read by the task that tokenizes the shard)."""

    dedup_dir: ArtifactPath
    source: str

    def rows(self, shard_name: str):
        from lmforge.pipeline.dedup.across import removed_rows

        return removed_rows(self.dedup_dir, self.source, shard_name)


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


def _plan(clean_dir, split: str, target_bytes: float) -> list[list[str]]:
    paths = shard_paths(clean_dir, split)
    sizes = [text_bytes(p) for p in paths] if target_bytes > 0 else [0] * len(paths)
    return [[paths[k].name for k in group] for group in group_shards(sizes, target_bytes)]


@stage(
    name="tokenize",
    inputs=("clean", "train_tokenizer"),
    config=("tokenizer.shard_mb",),
    parse_config=parse,
    version="2",
    num_cpus=0,  # it only drives the per-shard tasks below
    per_source=True,
    mixture_inputs=("dedup_across",),
)
def tokenize(ctx: StageContext) -> dict:
    import ray

    from lmforge.tokenizer.packing import token_dtype
    from lmforge.tokenizer.split_index import write_split_index

    clean_dir = ctx.input("clean")
    stats = ctx.input_manifests["train_tokenizer"].get("summary", {})
    itemsize = token_dtype(int(stats.get("val_vocab_size", 65536))).itemsize
    bytes_per_token = float(stats.get("val_bytes_per_token") or DEFAULT_BYTES_PER_TOKEN)
    # Text bytes that make shard_mb of tokens.
    target = ctx.config.shard_mb * 1e6 * bytes_per_token / itemsize
    # Sent once, not once per task (with a bucket they carry their artifacts' manifests).
    clean_ref, tokenizer_ref = ray.put(clean_dir), ray.put(ctx.input("train_tokenizer"))
    # One CPU a task: `tokenize_partition` encodes on the task's thread (`on_this_thread`), so
    # the tasks run in the workers the earlier stages left, not in workers started anew for an
    # environment of their own.
    # Spread over the nodes by their CPUs (`node_spread`): Ray's default packs short tasks onto
    # the coordinator's node while it has room, and its SPREAD follows a resource view that lags, so
    # a cluster's other nodes could sit idle (seen in the private-nodes bucket test).
    across = ctx.inputs.get("dedup_across")  # in a mixture: rows a source before this one holds
    skip = SkipRows(across, ctx.source) if across is not None else None
    remote = ray.remote(num_cpus=1)(_tokenize_group)
    plans = {split: _plan(clean_dir, split, target) for split in ("train", "val")}
    where = iter(spread_strategies(sum(len(groups) for groups in plans.values())))
    futures = {
        split: [
            remote.options(scheduling_strategy=next(where)).remote(
                tokenizer_ref, clean_ref, group, ctx.output, split, index, skip
            )
            for index, group in enumerate(groups)
        ]
        for split, groups in plans.items()
    }
    summary: dict = {"shards": 0}
    nodes = set()
    for split, refs in futures.items():
        results = ray.get(refs)
        ctx.add_files([entry for r in results for entry in r["files"]])
        infos = [r["info"] for r in results]
        write_split_index(ctx.out_dir, split, infos)
        nodes |= {r["node"] for r in results}
        summary["shards"] += len(infos)
        summary[f"{split}_shards"] = len(infos)
        summary[f"{split}_clean_shards"] = sum(len(g) for g in plans[split])
        summary[f"{split}_tokens"] = sum(i.n_tokens for i in infos)
        summary[f"{split}_docs"] = sum(i.n_docs for i in infos)
        if skip is not None:
            summary[f"{split}_docs_removed_across"] = sum(r["skipped"] for r in results)
        if split == "val":
            summary["val_bytes"] = sum(r["text_bytes"] for r in results)
    summary["nodes"] = len(nodes)
    ctx.tracker.log_metrics({k: v for k, v in summary.items()})
    return summary
