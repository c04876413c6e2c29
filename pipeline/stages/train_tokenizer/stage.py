"""`train_tokenizer`: byte-level BPE on a hash-chosen sample of the clean train split, streamed.

`tokenizer.sample_bytes` bounds the text the trainer sees, and so its memory: HF BPE keeps every
distinct pre-token and pair of its input. Documents are chosen by a hash of their id
(`lmforge.pipeline.sources.hash_sample`), so a rerun trains on the same text and writes a
byte-identical `tokenizer.json`, however the clean split is sharded. Words seen fewer than
`tokenizer.min_word_count` times in the sample are left out of BPE (`lmforge.tokenizer.train`).
"""

from __future__ import annotations

from dataclasses import fields
from itertools import chain, islice

from tokenizers import Tokenizer

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.sources.hash_sample import (
    HashSample,
    SampleStats,
    mixture_budgets,
    split_size,
)
from lmforge.pipeline.sources.parquet_shards import iter_texts
from lmforge.pipeline.storage.input_artifact import ArtifactPath
from lmforge.pipeline.typed_config import from_mapping
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.train import TrainingWords

STATS_DOCS = 2000
"""Validation documents used for the compression statistics."""
EXCLUDED_SOURCES = ("canary",)
"""Planted canaries stay out of the vocabulary: a secret learned as one token would look
memorised to the exposure probe without being memorised."""


TRAINING_KEYS = tuple(f"tokenizer.{f.name}" for f in fields(TokenizerConfig))
"""The `tokenizer` settings this stage reads (and its key covers): not `tokenizer.shard_mb`,
which only sizes `tokenize`'s shards, so resizing shards does not retrain the tokenizer."""


def parse(sections: dict) -> TokenizerConfig:
    """`TokenizerConfig` from {"tokenizer.<field>": value} (the paths of TRAINING_KEYS)."""
    values = {path.removeprefix("tokenizer."): value for path, value in sections.items()}
    return from_mapping(TokenizerConfig, values, "tokenizer")


def train_on_sample(
    clean_dir: ArtifactPath, cfg: TokenizerConfig
) -> tuple[Tokenizer, SampleStats, TrainingWords]:
    """BPE trained on about `cfg.sample_bytes` of the train split (all of it for 0), what was
    sampled, and how many distinct words the sample held and BPE kept."""
    from lmforge.tokenizer.train import train_bpe_counted

    sample = HashSample(clean_dir, "train", cfg.sample_bytes, exclude_sources=EXCLUDED_SOURCES)
    tok, words = train_bpe_counted(sample, cfg)
    return tok, sample.stats(), words


def train_on_mixture(
    clean_dirs: dict[str, ArtifactPath], weights: list[float], cfg: TokenizerConfig
) -> tuple[Tokenizer, SampleStats, TrainingWords, dict]:
    """BPE trained on a sample drawn from each source by its tokenizer weight
    (`mixture_budgets`), never by the mixture's weights; what each source gave."""
    from lmforge.tokenizer.train import train_bpe_counted

    sizes = [split_size(d, "train", EXCLUDED_SOURCES)[1] for d in clean_dirs.values()]
    budgets = mixture_budgets(sizes, weights, cfg.sample_bytes)
    samples = {
        source: HashSample(clean_dir, "train", budget, exclude_sources=EXCLUDED_SOURCES)
        for (source, clean_dir), budget in zip(clean_dirs.items(), budgets, strict=True)
    }
    tok, words = train_bpe_counted(chain.from_iterable(samples.values()), cfg)
    stats = [s.stats() for s in samples.values()]
    total = SampleStats(*(sum(getattr(s, f.name) for s in stats) for f in fields(SampleStats)))
    sampled = sum(s.sample_bytes for s in stats) or 1
    per_source = {
        source: {
            "train_text_bytes": s.split_bytes,
            "sample_text_bytes": s.sample_bytes,
            "sample_share": round(s.sample_bytes / sampled, 4),
        }
        for source, s in zip(samples, stats, strict=True)
    }
    return tok, total, words, per_source


@stage(
    name="train_tokenizer",
    inputs=("clean",),
    config=TRAINING_KEYS,
    parse_config=parse,
    version="3",
    num_cpus=1,
    mixture_fields={"tokenizer_weight": 0.0},  # not the mixture's weights: reweighting keeps it
)
def train_tokenizer(ctx: StageContext) -> dict:
    from lmforge.tokenizer.io import save_tokenizer
    from lmforge.tokenizer.stats import tokenizer_stats

    clean_dirs = ctx.inputs_of("clean")
    per_source: dict = {}
    if ctx.sources:
        weights = [float(s["tokenizer_weight"]) for s in ctx.sources]
        tok, sampled, words, per_source = train_on_mixture(clean_dirs, weights, ctx.config)
    else:
        tok, sampled, words = train_on_sample(ctx.input("clean"), ctx.config)
    save_tokenizer(tok, ctx.out_dir, model_max_length=1 << 20)
    val = chain.from_iterable(iter_texts(d, "val") for d in clean_dirs.values())
    stats = tokenizer_stats(tok, islice(val, STATS_DOCS))
    summary = {
        **sampled.to_summary(),
        **words.to_summary(),
        **{f"val_{k}": v for k, v in stats.items()},
    }
    ctx.tracker.log_metrics(summary)
    if per_source:
        summary["sources"] = per_source
    return summary
