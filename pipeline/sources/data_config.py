"""The `data` config group, read by the `clean` stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lmforge.pipeline.filters.chain import FilterChainConfig
from lmforge.pipeline.filters.dedup_exact import ExactDedupConfig
from lmforge.pipeline.filters.dedup_paragraph import ParagraphDedupConfig
from lmforge.pipeline.filters.minhash import MinHashConfig


@dataclass(kw_only=True, slots=True)
class CanaryConfig:
    """Random secrets planted in the train split so `harm` can measure memorisation."""

    enabled: bool = False
    "Plant canaries (the `probe` preset switches this on)."
    per_repeat: int = 2
    "Distinct canaries for each repeat count."
    repeats: list[int] = field(default_factory=lambda: [1, 10, 100])
    "How many times each canary is repeated in the train split."
    digits: int = 6
    "Digits of each secret number."
    seed: int = 0
    "Seed of the secrets."


@dataclass(kw_only=True, slots=True)
class DedupConfig:
    """Global deduplication across all partitions, after the filter chain."""

    exact: ExactDedupConfig = field(default_factory=ExactDedupConfig)
    "Exact duplicates: hash of the normalised text."
    near: MinHashConfig = field(default_factory=MinHashConfig)
    "Near duplicates: MinHash signatures with LSH banding."
    across: bool = True
    "In a mixture, also remove a source's documents that duplicate an earlier-listed source's."
    paragraph: ParagraphDedupConfig = field(default_factory=ParagraphDedupConfig)
    "Lines or paragraphs repeated across the documents kept (boilerplate), after the two above."


@dataclass(kw_only=True, slots=True)
class SourceConfig:
    """One named source of a mixture (`data.sources`)."""

    name: str
    "The source's name: its stages' suffix (`clean[code]`) and its rows in the model card."
    paths: list[str] = field(default_factory=list)
    "Its files or globs, or `hf:NAME[:SPLIT]`, as `data.paths` takes them."
    weight: float
    "Its share of the training tokens, relative to the other sources' weights."
    text_field: str = ""
    "Field or column of the text (empty: `data.text_field`)."
    tokenizer_weight: float = 0.0
    "Its share of the tokenizer's training sample (0: in proportion to its cleaned bytes)."

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise ValueError(f"source {self.name!r} has weight {self.weight}; a weight must be > 0")
        if self.tokenizer_weight < 0:
            raise ValueError(
                f"source {self.name!r} has tokenizer_weight {self.tokenizer_weight}; it must be "
                ">= 0 (0: by its cleaned bytes)"
            )
        if not self.paths:
            raise ValueError(f"source {self.name!r} has no paths; give it files, globs or hf:NAME")


@dataclass(kw_only=True, slots=True)
class DataConfig:
    paths: list[str] = field(default_factory=list)
    "Text/JSONL/Parquet files or globs, or `hf:NAME[:SPLIT]`; empty = the embedded corpus."
    text_field: str = "text"
    "Field or column holding the text in JSONL/Parquet/`datasets` sources."
    val_fraction: float = 0.05
    "Share of documents (by hash of the id) in the validation split."
    shard_mb: float = 128.0
    "Target size of an output Parquet shard (compressed file bytes); the last of a split is less."
    partition_docs: int = 2000
    "Documents a filter task runs through the chain at a time (its memory, not its size)."
    read_split_mb: float = 64.0
    "Bytes on disk per read task: bigger plain JSONL and Parquet files are split, smaller packed."
    max_docs: int = 0
    "Stop after this many documents read (0 = no cap)."
    on_error: Literal["fail", "skip"] = "fail"
    "A file that cannot be read: fail the stage (default) or skip it and count it."
    max_text_file_mb: float = 64.0
    "Largest plain-text file (one document, read whole); a bigger one fails or is skipped."
    filters: FilterChainConfig = field(default_factory=FilterChainConfig)
    "The cleaning chain, in order; each step has an `enabled` switch."
    dedup: DedupConfig = field(default_factory=DedupConfig)
    "Exact and near-duplicate removal."
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
    "Memorisation canaries (off by default)."
    sources: list[SourceConfig] = field(default_factory=list)
    "A mixture: named sources, each with its paths and weight (empty: `data.paths` alone)."

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"data.val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.partition_docs <= 0 or self.shard_mb <= 0:
            raise ValueError("data.partition_docs and data.shard_mb must be > 0")
        if self.max_text_file_mb <= 0:
            raise ValueError("data.max_text_file_mb must be > 0")
        if self.read_split_mb <= 0:
            raise ValueError("data.read_split_mb must be > 0")
        if self.sources and self.paths:
            raise ValueError(
                "data.paths and data.sources are both set; list the paths under a source"
            )
