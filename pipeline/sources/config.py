"""The `data` config group, read by the `clean` stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


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
class DataConfig:
    paths: list[str] = field(default_factory=list)
    "Text/JSONL/Parquet files or globs, or `hf:NAME[:SPLIT]`; empty = the embedded corpus."
    text_field: str = "text"
    "Field or column holding the text in JSONL/Parquet/`datasets` sources."
    min_chars: int = 200
    "Documents shorter than this (after normalisation) are dropped."
    max_chars: int = 1_000_000
    "Documents longer than this are dropped."
    val_fraction: float = 0.05
    "Share of documents (by hash of the id) in the validation split."
    docs_per_shard: int = 5000
    "Rows per output Parquet shard."
    max_docs: int = 0
    "Stop after this many documents read (0 = no cap)."
    on_error: Literal["fail", "skip"] = "fail"
    "A file that cannot be read: fail the stage (default) or skip it and count it."
    canaries: CanaryConfig = field(default_factory=CanaryConfig)
    "Memorisation canaries (off by default)."

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"data.val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.min_chars < 0 or self.max_chars <= self.min_chars:
            raise ValueError("data.min_chars must be >= 0 and below data.max_chars")
        if self.docs_per_shard <= 0:
            raise ValueError("data.docs_per_shard must be positive")
