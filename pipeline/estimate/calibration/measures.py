"""The measuring functions of the calibration cases (`cases.py`): each runs one stage's work at
one size, as its benchmark does, and returns samples `{"stage", "size", "measured", "source"}`
(`calibrate.py`). They import what they run when called: listing the cases costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lmforge.pipeline.estimate.calibration.store_samples import samples_from_store
from lmforge.pipeline.estimate.cost_model import Cluster

CPUS = os.cpu_count() or 2


def measure_clean(root: Path, size: tuple) -> list[dict]:
    """`clean` on `docs` synthetic documents of about `words` words (clean_scale's run), with
    the default filter chain `on` or `off`, in `files` files (each a read unit: the
    coordinator's memory per unit), by default one per 5,000 documents, at most 32."""
    from lmforge.pipeline.estimate.calibration.clean_in_process import FILTERS, run_clean
    from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize
    from lmforge.pipeline.sources.files import read_source

    docs, words, filters = size[:3]
    files = size[3] if len(size) > 3 else max(1, min(32, docs // 5000))
    corpus = root / f"corpus-{docs}-{words}"
    shutil.rmtree(corpus, ignore_errors=True)  # a killed measurement's, maybe part-written
    synthesize(corpus, docs, files, 0, words, CPUS)
    text_bytes = sum(
        len(doc.text.encode("utf-8"))
        for path in sorted(corpus.glob("*.jsonl.zst"))
        for doc in read_source(str(path))
    )
    workdir = root / f"clean-{docs}-{words}-{filters}"
    shutil.rmtree(workdir, ignore_errors=True)  # a killed measurement's: its cache would hit
    workdir.mkdir()
    chain = [f"data.filters.{f}.enabled=true" for f in FILTERS if filters == "on"]
    try:
        run_clean(corpus, workdir, ["data.val_fraction=0.05", *chain])
        samples = samples_from_store(workdir / "store")
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    for sample in samples:
        sample["size"]["bytes"] = text_bytes  # the text itself, as --bytes counts it
        sample["source"] = f"clean_scale docs={docs} words={words} filters={filters}"
    return samples


def measure_training(root: Path, size: tuple[str, int]) -> list[dict]:
    """Training steps of train_throughput's `model` case in its worker layout."""
    import numpy as np

    from lmforge.pipeline.estimate.calibration.training_steps import (
        case_for,
        lmforge_run,
        write_shards,
    )
    from lmforge.pipeline.stages.pretrain import cost as pretrain_cost
    from lmforge.pipeline.training.train_config import TrainConfig

    model, steps = size
    case = case_for(model, [])
    work = root / f"train-{model}-{steps}"
    try:
        data = write_shards(work / "shards", steps * case.batch + 1, case.model)
        seconds = list(lmforge_run(work, data, steps, case, cpus=CPUS)["step_seconds"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    train = TrainConfig(
        max_steps=len(seconds),
        global_batch_size=case.batch,
        micro_batch_size=case.micro_batch,
        num_workers=case.workers,
        cpus_per_worker=CPUS // case.workers,
        zero_stage=case.stage,
        checkpoint_every=0,
        precision="fp32",
    )
    shape = dataclasses.asdict(case.model)
    vocab = shape.pop("vocab_size")
    found = pretrain_cost._size(shape, dataclasses.asdict(train), vocab)
    found |= pretrain_cost._cluster_part(found, Cluster(nodes=1, cpus_per_node=CPUS))
    found |= {"startup_excluded": 1.0, "checkpoints": 0.0, "mfu": 0.0, "gpu_peak_flops": 0.0}
    found["train_tokens_available"] = 0.0
    wall = float(np.median(seconds)) * len(seconds)
    return [
        {
            "stage": "pretrain",
            "size": found,
            "measured": {"wall_s": wall},
            "source": f"train_throughput model={model} steps={steps}",
        }
    ]


def measure_tokenizer(root: Path, size: tuple[str, str, int]) -> list[dict]:
    """BPE training on a `sample` of a synthetic open-vocabulary split of `split` bytes, in a
    fresh process (tokenizer_sample's run: the stage's own `train_on_sample`)."""
    from lmforge.pipeline.estimate.calibration.synthetic_split import parse_size, write_split
    from lmforge.pipeline.estimate.calibration.tokenizer_training import train
    from lmforge.tokenizer.config import TokenizerConfig

    split, sample, vocab = size
    clean = root / f"tokenizer-{split}"
    clean.mkdir(parents=True, exist_ok=True)
    try:
        write_split(clean, "train", parse_size(split), 0, 1.25, 128 << 20)
        min_count = TokenizerConfig().min_word_count  # the stage's default
        run = train(clean, root / "tokenizer.json", parse_size(sample), vocab, min_count)
    finally:
        shutil.rmtree(clean, ignore_errors=True)
    found = {
        "train_text_bytes": run["train_text_bytes"],
        "sample_bytes": run["sample_text_bytes"],
        "vocab_size": vocab,
        "bytes_per_token": 3.4,
        "fresh_process": 1.0,  # its memory: a fresh process's, not a Ray worker's (cost_model)
    }
    measured = {"wall_s": run["wall_s"], "coordinator_rss_mb": run["peak_rss_mb"]}
    source = f"tokenizer_sample split={split} sample={sample} vocab={vocab}"
    return [{"stage": "train_tokenizer", "size": found, "measured": measured, "source": source}]


def measure_tokenize(root: Path, size: tuple[float, int]) -> list[dict]:
    """lmforge's tokenize path (`tokenize_partition`, on the calling thread) on `mb` MB of
    documentation text, one CPU (tokenize_throughput's run); start-up left out."""
    from lmforge.pipeline.estimate.calibration.tokenize_timing import (
        MB,
        documentation_corpus,
        lmforge_encode,
        timed,
    )
    from lmforge.tokenizer import TokenizerConfig, train_bpe

    mb, vocab = size
    texts = documentation_corpus(int(mb * MB))
    tok = train_bpe(iter(texts[:2000]), TokenizerConfig(vocab_size=vocab))
    out = root / f"tokenize-{mb}"
    seconds = timed(lambda: lmforge_encode(tok, texts, out))
    shutil.rmtree(out, ignore_errors=True)
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    found = {
        **Cluster(nodes=1, cpus_per_node=1).as_size(),
        "text_bytes": text_bytes,
        "val_text_bytes": 0.0,
        "docs": len(texts),
        "shards": 1,
        "bytes_per_token": 3.4,
        "vocab_size": vocab,
        "startup_excluded": 1.0,
    }
    source = f"tokenize_throughput mb={mb} vocab={vocab}"
    return [{"stage": "tokenize", "size": found, "measured": {"wall_s": seconds}, "source": source}]


def measure_sample_index(root: Path, windows: float) -> list[dict]:
    """The sample index of `windows` windows (one epoch) built by a fresh process on /dev/shm
    (token_scale's build step: its wall time and peak RSS)."""
    from lmforge.pipeline.estimate.calibration.index_build import build_in_fresh_process

    directory = Path("/dev/shm") / f"lmforge-estimate-index-{os.getpid()}"
    try:
        build = build_in_fresh_process(directory, int(windows))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    found = {
        "n_windows": float(int(windows)),
        "epochs": 1.0,
        "positions": float(int(windows)),
        "fresh_process": 1.0,  # its memory: a fresh process's, not a Ray worker's (cost_model)
    }
    measured = {"wall_s": build["build_s"], "coordinator_rss_mb": build["peak_rss_mb"]}
    source = f"token_scale index build windows={int(windows)}"
    return [{"stage": "sample_index", "size": found, "measured": measured, "source": source}]


def measure_pipeline(root: Path, overrides: tuple[str, ...]) -> list[dict]:
    """`lmforge run` in a fresh workdir; every stage's estimate record is a sample."""
    workdir = root / ("pipeline-" + "-".join(o.split("=")[-1] for o in overrides[:3]))
    command = [sys.executable, "-m", "lmforge.pipeline.cli.main", "run", f"workdir={workdir}"]
    shutil.rmtree(workdir, ignore_errors=True)  # a killed measurement's: its cache would hit
    try:
        subprocess.run([*command, *overrides], check=True, stdout=subprocess.DEVNULL)
        samples = samples_from_store(workdir / "store")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for sample in samples:
        sample["source"] = "lmforge run " + " ".join(overrides)
    return samples
