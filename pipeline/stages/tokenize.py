"""`tokenize`: encode the clean shards in parallel Ray tasks into memory-mappable token shards.

Each clean Parquet shard is one partition and becomes one token shard (`<|endoftext|>` before
every document, the convention of `lmforge.tokenizer.convention`). Windows of block_size+1 are cut
at training time, so this stage does not depend on the model's block size.
"""

from __future__ import annotations

from lmforge.pipeline.sources.parquet_shards import iter_texts, shard_paths
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.stages.train_tokenizer import parse


def _tokenize_shard(tokenizer_dir: str, parquet_path: str, out_dir: str, split: str, index: int):
    import pyarrow.parquet as pq

    from lmforge.tokenizer.partition import tokenize_partition

    def texts():
        for batch in pq.ParquetFile(parquet_path).iter_batches(batch_size=1024, columns=["text"]):
            yield from batch.column(0).to_pylist()

    info = tokenize_partition(tokenizer_dir, texts(), out_dir, split, index)
    return {"split": split, "index": index, "n_tokens": info.n_tokens, "n_docs": info.n_docs}


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
    tokenizer_dir = str(ctx.input("train_tokenizer"))
    # tokenizers starts a rayon thread per core; one task holds one CPU, so one thread each.
    remote = ray.remote(_tokenize_shard).options(
        num_cpus=1, runtime_env={"env_vars": {"RAYON_NUM_THREADS": "1"}}
    )
    futures = [
        remote.remote(tokenizer_dir, str(path), str(ctx.out_dir), split, index)
        for split in ("train", "val")
        for index, path in enumerate(shard_paths(clean_dir, split))
    ]
    results = ray.get(futures)
    summary: dict = {"shards": len(results)}
    for split in ("train", "val"):
        summary[f"{split}_tokens"] = sum(r["n_tokens"] for r in results if r["split"] == split)
        summary[f"{split}_docs"] = sum(r["n_docs"] for r in results if r["split"] == split)
    n_bytes = sum(len(t.encode("utf-8")) for t in iter_texts(clean_dir, "val"))
    summary["val_bytes"] = n_bytes
    ctx.tracker.log_metrics({k: v for k, v in summary.items()})
    return summary
