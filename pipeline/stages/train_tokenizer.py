"""`train_tokenizer`: byte-level BPE on the clean train split, streamed shard by shard."""

from __future__ import annotations

from itertools import islice

from lmforge.pipeline.sources.parquet_shards import iter_texts
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping
from lmforge.tokenizer.config import TokenizerConfig

STATS_DOCS = 2000
"""Validation documents used for the compression statistics."""


def parse(sections: dict) -> TokenizerConfig:
    return from_mapping(TokenizerConfig, sections["tokenizer"], "tokenizer")


@stage(
    name="train_tokenizer",
    inputs=("clean",),
    config=("tokenizer",),
    parse_config=parse,
    version="2",
    num_cpus=1,
)
def train_tokenizer(ctx: StageContext) -> dict:
    from lmforge.tokenizer.io import save_tokenizer
    from lmforge.tokenizer.stats import tokenizer_stats
    from lmforge.tokenizer.train import train_bpe

    clean_dir = ctx.input("clean")
    # Planted canaries stay out of the vocabulary: a secret learned as one token would look
    # memorised to the exposure probe without being memorised.
    tok = train_bpe(iter_texts(clean_dir, "train", exclude_sources=("canary",)), ctx.config)
    save_tokenizer(tok, ctx.out_dir, model_max_length=1 << 20)
    stats = tokenizer_stats(tok, islice(iter_texts(clean_dir, "val"), STATS_DOCS))
    ctx.tracker.log_metrics({f"val_{k}": v for k, v in stats.items()})
    return {f"val_{k}": v for k, v in stats.items()}
