"""`tokenize`: encode the clean shards in parallel Ray tasks into memory-mappable token shards.

Each clean Parquet shard is one partition and becomes one token shard (`<|endoftext|>` before
every document, the convention of `lmforge.tokenizer.convention`). Windows of block_size+1 are cut
at training time, so this stage does not depend on the model's block size.

Each task, on whatever node it lands, reads its clean shard and the tokenizer itself (from a
bucket: through that node's cache), writes the token shard in a local scratch directory and puts
its files into the store through `ctx.output`; only counts and the files' manifest entries come
back to the stage.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from lmforge.pipeline.artifact_output import ArtifactOutput
from lmforge.pipeline.sources.parquet_shards import shard_paths
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.stages.train_tokenizer import parse


def _tokenize_shard(
    tokenizer_dir, clean_dir, name: str, output: ArtifactOutput, split: str, index: int
) -> dict:
    import pyarrow.parquet as pq

    from lmforge.tokenizer.partition import tokenize_partition

    text_bytes = 0

    def texts():
        nonlocal text_bytes
        parquet = pq.ParquetFile(os.fspath(clean_dir / name))
        for batch in parquet.iter_batches(batch_size=1024, columns=["text"]):
            for text in batch.column(0).to_pylist():
                text_bytes += len(text.encode("utf-8"))
                yield text

    with tempfile.TemporaryDirectory(prefix="lmforge-tokenize-") as scratch:
        info = tokenize_partition(os.fspath(tokenizer_dir), texts(), scratch, split, index)
        files = [output.put(path, path.name) for path in sorted(Path(scratch).iterdir())]
    return {
        "node": _node_id(),
        "split": split,
        "index": index,
        "n_tokens": info.n_tokens,
        "n_docs": info.n_docs,
        "text_bytes": text_bytes,
        "files": files,
    }


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""


@stage(
    name="tokenize",
    inputs=("clean", "train_tokenizer"),
    config=("tokenizer",),
    parse_config=parse,
    version="1",
    num_cpus=0,  # it only drives the per-shard tasks below
)
def tokenize(ctx: StageContext) -> dict:
    import ray

    clean_dir = ctx.input("clean")
    # Sent once, not once per task (with a bucket they carry their artifacts' manifests).
    clean_ref, tokenizer_ref = ray.put(clean_dir), ray.put(ctx.input("train_tokenizer"))
    # tokenizers starts a rayon thread per core; one task holds one CPU, so one thread each.
    remote = ray.remote(_tokenize_shard).options(
        num_cpus=1, runtime_env={"env_vars": {"RAYON_NUM_THREADS": "1"}}
    )
    futures = [
        remote.remote(tokenizer_ref, clean_ref, path.name, ctx.output, split, index)
        for split in ("train", "val")
        for index, path in enumerate(shard_paths(clean_dir, split))
    ]
    results = ray.get(futures)
    ctx.add_files([entry for r in results for entry in r["files"]])
    summary: dict = {"shards": len(results), "nodes": len({r["node"] for r in results})}
    for split in ("train", "val"):
        summary[f"{split}_tokens"] = sum(r["n_tokens"] for r in results if r["split"] == split)
        summary[f"{split}_docs"] = sum(r["n_docs"] for r in results if r["split"] == split)
    summary["val_bytes"] = sum(r["text_bytes"] for r in results if r["split"] == "val")
    ctx.tracker.log_metrics({k: v for k, v in summary.items()})
    return summary
