"""The measurements `lmforge estimate` is fitted on and checked against.

Each case runs one benchmark's measuring function at one size and returns samples
`{"stage", "size", "measured", "source"}` (`estimate.calibrate`): the stage's size as
its cost model reads it, and the wall time, peak memory by process and bytes measured.

- `clean_scale`: the `clean` stage on a synthetic corpus (`bench/clean_scale.py`,
  `bench/corpus_synth.py`) of `docs` documents of about `words` words, dedup on, the filter
  chain off (as the clean benches run it) or on;
- `tokenizer_sample`: BPE training on a sample of a synthetic split, in a fresh process
  (`bench/tokenizer_sample.py`);
- `tokenize_throughput`: the tokenize path on one CPU (`bench/tokenize_throughput.py`);
- `train_throughput`: lmforge's training steps on one of `bench/train_throughput.py`'s models
  (start-up left out, median step time);
- `token_scale`: a sample index of `windows` windows built by a fresh process
  (`bench/token_scale.py`'s build step);
- `pipeline`: `lmforge run` with the given overrides in a fresh workdir, every stage's manifest
  record (`estimate`) becoming a sample.

`lmforge estimate --calibrate` runs each case's `calibration` sizes (`quick` with `--quick`);
`bench/estimate_accuracy.py` fits on `fit` and checks `target`. Adding a benchmark (the eval
and checkpoint scale benches) is writing its `measure` (`bench/estimate_measures.py`) and
listing a `Case` in `CASES`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from estimate_measures import (  # noqa: E402
    CPUS,
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

PIPELINE_FIT = (
    ("preset=tiny", "data.max_docs=300", "train.max_steps=20", *TINY_EVAL),
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
so an evaluation stage's cost per FLOP is told apart from its cost per generated token."""

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
        quick=(("preset=tiny", "data.max_docs=300", "train.max_steps=20", *TINY_EVAL),),
        fit=PIPELINE_FIT,
        # The whole `small` preset (2,000 steps) takes about 3 hours on 2 CPUs: its model
        # trained for 100 steps, evaluated as the preset says.
        target=(("preset=tiny",), ("preset=small", "train.max_steps=100")),
        quick_fit=(("preset=tiny", "data.max_docs=300", "train.max_steps=20", *TINY_EVAL),),
        quick_target=(
            ("preset=tiny", "train.max_steps=150"),
            ("preset=small", "train.max_steps=30", "eval.perplexity.max_tokens=20000"),
        ),
        uses_ray=False,
    ),
]


def run_cases(root: Path, sizes_of: Callable[[Case], tuple]) -> list[dict]:
    """Every case at the sizes `sizes_of` picks, each size in a fresh process (with its own
    local Ray where the case needs one), so no earlier measurement's memory counts in it.

    Each size's samples are kept in `root/measured/` as they come: a run that stops part-way
    (a long pipeline case killed) measures again only what it had not."""
    root.mkdir(parents=True, exist_ok=True)
    samples: list[dict] = []
    for case in CASES:
        for size in sizes_of(case):
            kept = measured_path(root, case.name, size)
            if kept.is_file():
                print(f"estimate: {case.name} at {size} measured earlier ({kept})", flush=True)
                samples += json.loads(kept.read_text(encoding="utf-8"))
                continue
            print(f"estimate: measuring {case.name} at {size}", flush=True)
            command = [sys.executable, __file__, case.name, json.dumps(size), str(root)]
            done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"measuring {case.name} at {size} failed: see its output above")
            found = json.loads(done.stdout.strip().splitlines()[-1])
            for sample in found:
                sample["case"], sample["case_size"] = case.name, json.dumps(size)
            kept.parent.mkdir(exist_ok=True)
            partial = kept.with_suffix(".partial")
            partial.write_text(json.dumps(found), encoding="utf-8")
            os.replace(partial, kept)
            samples += found
    return samples


def measured_path(root: Path, case: str, size: Any) -> Path:
    """Where the samples of one case at one size are kept under `root`."""
    digest = hashlib.sha256(json.dumps([case, size]).encode()).hexdigest()[:16]
    return root / "measured" / f"{case}-{digest}.json"


def measure_here(name: str, size: Any, root: Path) -> list[dict]:
    """One case at one size in this process (the child `run_cases` starts), on the pipeline's
    own local runtime (`ensure_ray`): a plain `ray.init` would also start Ray Train's preemption
    watcher and placement-group cleaner, which the pipeline's runs do without, and time them."""
    from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray

    case = next(c for c in CASES if c.name == name)
    if not case.uses_ray:
        return case.measure(root, size)
    os.environ.setdefault("RAY_worker_niceness", "0")
    ensure_ray(None, num_cpus=CPUS)
    try:
        return case.measure(root, size)
    finally:
        shutdown_ray()


def calibration_samples(root: Path, *, quick: bool = False) -> list[dict]:
    """What `lmforge estimate --calibrate` fits on."""
    return run_cases(root, lambda case: case.quick if quick else case.calibration)


if __name__ == "__main__":
    found = measure_here(sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3]))
    print(json.dumps(found))
