"""The measurements `lmforge estimate` is fitted on (`--calibrate`) and checked against
(`bench/estimate_accuracy.py`): each case runs one stage's work at a few sizes through its
measuring function (`measures.py`), each giving samples `{"stage", "size", "measured", "source"}`
(`calibrate.py`): the stage's size as its cost model reads it, and the wall time, peak memory by
process and bytes measured.

- `clean_scale`: the `clean` stage on a synthetic corpus (`synthetic_corpus.py`, as
  `bench/clean_scale.py` runs it) of `docs` documents of about `words` words, dedup on, the
  filter chain off (as the clean benches run it) or on;
- `tokenizer_sample`: BPE training on a sample of a synthetic split, in a fresh process
  (`synthetic_split.py`, `tokenizer_training.py`; `bench/tokenizer_sample.py`);
- `tokenize_throughput`: the tokenize path on one CPU (`tokenize_timing.py`;
  `bench/tokenize_throughput.py`);
- `train_throughput`: lmforge's training steps on one of `training_steps.py`'s models
  (start-up left out, median step time; `bench/train_throughput.py`);
- `token_scale`: a sample index of `windows` windows built by a fresh process
  (`index_build.py`; `bench/token_scale.py`'s build step);
- `pipeline`: `lmforge run` with the given overrides in a fresh workdir, every stage's manifest
  record (`estimate`) becoming a sample.

`lmforge estimate --calibrate` runs each case's `calibration` sizes (`quick` with `--quick`);
`bench/estimate_accuracy.py` fits on `fit` and checks `target`. Adding a benchmark (the eval
and checkpoint scale benches) is writing its `measure` (`measures.py`) and listing a `Case` in
`CASES`. A case is named after its benchmark: the name is part of each sample it gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.pipeline.estimate.calibration.measures import (
    measure_clean,
    measure_pipeline,
    measure_sample_index,
    measure_tokenize,
    measure_tokenizer,
    measure_training,
)

TINY_EVAL = (
    "eval.sample.max_new_tokens=16",
    "eval.harm.num_prompts=8",
    "eval.harm.bias_samples=0",
    "eval.harm.pii_samples=8",
    "eval.harm.extraction_prefixes=4",
)


@dataclass(frozen=True)
class Case:
    name: str
    measure: Callable[[Path, Any], list[dict]]
    calibration: tuple
    quick: tuple
    fit: tuple
    target: tuple
    quick_fit: tuple
    quick_target: tuple
    uses_ray: bool = True
    """Measures in a local Ray runtime of its own (else the case starts what it needs, as
    `lmforge run` does)."""


TOKENIZER_SIZES = (
    ("32MB", "16MB", 8192),
    ("96MB", "16MB", 8192),
    ("64MB", "48MB", 8192),
    ("64MB", "16MB", 32768),
)
"""(split, sample, vocabulary) of the BPE cases."""
TOKENIZER_QUICK = (("16MB", "8MB", 8192), ("48MB", "8MB", 8192), ("32MB", "24MB", 8192))

ON_ACTORS = tuple(f"eval.{name}.in_process=false" for name in ("perplexity", "sample", "harm"))
"""The eval stages on Ray actors, where the `tiny` preset runs them in the stage's process."""
PIPELINE_QUICK = ("preset=tiny", "data.max_docs=300", "train.max_steps=20", *TINY_EVAL)

PIPELINE_FIT = (
    PIPELINE_QUICK,
    (*PIPELINE_QUICK, *ON_ACTORS),
    ("preset=tiny", "data.max_docs=600", "train.max_steps=80", "eval.perplexity.max_tokens=20000"),
    # The small preset keeps web-text filters: about 1 in 25 documentation pages passes, so
    # more of the corpus is read and more of it held out, or the validation split is empty.
    (
        "preset=small",
        "data.max_docs=700",
        "data.val_fraction=0.3",
        "train.max_steps=10",
        *TINY_EVAL,
    ),
)
"""Pipeline runs the costs are fitted on: every stage at other sizes than the `tiny` and `small`
runs they are checked against (fewer documents, steps and evaluation prompts), with both models,
so an evaluation stage's cost per FLOP is told apart from its cost per generated token, and the
eval stages both in process and on actors, so the actors' start-up is told apart from the
stage's own."""

CASES = [
    Case(
        "clean_scale",
        measure_clean,
        calibration=(
            (50_000, 32, "off"),
            (150_000, 32, "off"),
            (50_000, 128, "off"),
            (10_000, 64, "on"),
            (30_000, 64, "on"),
            (20_000, 32, "off", 600),
        ),
        quick=(
            (20_000, 32, "off"),
            (60_000, 32, "off"),
            (20_000, 128, "off"),
            (10_000, 64, "on"),
            (10_000, 32, "off", 300),
        ),
        fit=(
            (100_000, 32, "off"),
            (300_000, 32, "off"),
            (100_000, 128, "off"),
            (10_000, 64, "on"),
            (30_000, 64, "on"),
            (20_000, 32, "off", 600),
        ),
        target=((1_000_000, 32, "off"), (3_000_000, 32, "off")),
        quick_fit=(
            (20_000, 32, "off"),
            (100_000, 32, "off"),
            (20_000, 128, "off"),
            (10_000, 64, "on"),
            (20_000, 64, "on"),
        ),
        quick_target=((200_000, 32, "off"), (40_000, 64, "on")),
    ),
    Case(
        "train_throughput",
        measure_training,
        calibration=(("tiny", 30), ("base", 15)),
        quick=(("tiny", 20), ("base", 8)),
        fit=(("tiny", 30), ("base", 15)),
        target=(),
        quick_fit=(("tiny", 20), ("base", 8)),
        quick_target=(),
    ),
    Case(
        "tokenizer_sample",
        measure_tokenizer,
        # Splits of two sizes under one sample: the read of the split is told apart from the
        # fixed start-up (one split size leaves it unidentified, and the fit set it to 0 s per
        # byte), and samples of two sizes under one split, from the training per byte.
        calibration=TOKENIZER_SIZES,
        quick=TOKENIZER_QUICK,
        fit=TOKENIZER_SIZES,
        target=(("512MB", "128MB", 32768),),
        quick_fit=TOKENIZER_QUICK,
        quick_target=(("96MB", "64MB", 8192),),
        uses_ray=False,
    ),
    Case(
        "tokenize_throughput",
        measure_tokenize,
        calibration=((5.0, 8192), (15.0, 8192)),
        quick=((3.0, 8192), (9.0, 8192)),
        fit=((5.0, 8192), (15.0, 8192)),
        target=(),
        quick_fit=((3.0, 8192), (9.0, 8192)),
        quick_target=(),
        uses_ray=False,
    ),
    Case(
        "token_scale",
        measure_sample_index,
        # Past the caches and the TLB's reach: shuffling the order costs about the same per
        # position from about 1.2e8 windows on (a cache and TLB miss each); smaller indexes
        # run faster per position (on the Intel Xeon 37, 57 and 63 ns a position at 3e7, 1.2e8
        # and 2.4e8 windows: fitted on the first two, the 2.4e8 build came out 33% short).
        calibration=(1.2e8, 3.6e8),
        quick=(5e6, 1.5e7),
        fit=(1.2e8, 3.6e8),
        target=(2.4e8,),
        quick_fit=(5e6, 1.5e7),
        quick_target=(6e7,),
        uses_ray=False,
    ),
    Case(
        "pipeline",
        measure_pipeline,
        calibration=PIPELINE_FIT,
        quick=(PIPELINE_QUICK, (*PIPELINE_QUICK, *ON_ACTORS)),
        fit=PIPELINE_FIT,
        # The whole `small` preset (2,000 steps) takes about 3 hours on 2 CPUs: its model
        # trained for 100 steps, evaluated as the preset says.
        target=(("preset=tiny",), ("preset=small", "train.max_steps=100")),
        quick_fit=(PIPELINE_QUICK, (*PIPELINE_QUICK, *ON_ACTORS)),
        quick_target=(
            ("preset=tiny", "train.max_steps=150"),
            ("preset=small", "train.max_steps=30", "eval.perplexity.max_tokens=20000"),
        ),
        uses_ray=False,
    ),
]
