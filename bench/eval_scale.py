"""`perplexity` at scale: a synthetic validation split scored on a pool of 1 and of 2 actors.

A fixed small shape (2 layers, d_model 64, 4 heads, block 64, vocabulary 2,048: the shape the
issue names), randomly initialised with a fixed seed, scores a generated validation split of
`--tokens` ids (seeded Zipf ids in documents of random length, `--shard-tokens` per shard; never
committed) through `stream_scoring.score_stream`, the code the stage runs (model losses only: no
n-gram baselines, no initial model), on a local Ray with `--cpus` CPUs, one CPU and one torch
thread per actor. It reports:

- `rel_diff`: the largest relative difference between the 1-actor and 2-actor figures (loss,
  bits per byte, interval, tokens, bytes);
- `tokens_per_s_1actor`, `tokens_per_s_2actors` (from each pool's first result on: the actors'
  start-up is left out) and `scaling_2actors`, their ratio (goal >= 1.7);
- `driver_peak_rss_mb`: this process's VmHWM over a run (reset at its start), the larger run's;
  `actor_peak_rss_mb`: the largest VmHWM of any actor (each resets it when it starts);
- `cpu_s_<n>`: CPU seconds of the driver and the actors (since they started) over the run, of
  which `driver_cpu_s_<n>` the driver's, and `tokens_per_cpu_s_<n>`;
  `machine_cores_busy_<n>`: busy CPU time of the whole machine over the run / its wall time
  (near `--cpus` when other work shares the machine: then the scaling figure says nothing);
- `single_process`: today's one-process path (the whole split as one int64 array, windows
  listed, per-position losses, one thread) in a fresh process, where it fits in half the
  available memory: tokens/s, VmHWM, and `rel_diff` of its loss against the pool's.

    .venv/bin/python bench/eval_scale.py [--tokens 20M] [--cpus 2] [--shard-tokens 4M]
        [--no-single-process] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clean_scale import parse_size  # noqa: E402

from lmforge.pipeline.estimate.calibration.clean_in_process import cpu_busy_seconds  # noqa: E402

SHAPE = {"n_layer": 2, "d_model": 64, "n_head": 4, "block_size": 64, "d_ff": 256}
VOCAB = 2048
BATCH, BATCHES_PER_CALL = 16, 16
SINGLE_PROCESS_BYTES_PER_TOKEN = 48
"""Today's path holds ids (int64), losses (float64), the window list and the per-document
bookkeeping (int64 targets and document indices): about this many bytes a token."""


def available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def write_split(root: Path, tokens: int, shard_tokens: int, seed: int) -> None:
    """Validation shards of `tokens` ids: documents of 50-1000 ids, each opened by EOT (id 0)."""
    from lmforge.tokenizer.packing import PackedStream
    from lmforge.tokenizer.shards import TokenShardWriter
    from lmforge.tokenizer.split_index import index_committed_shards

    rng = np.random.default_rng(seed)
    for index, start in enumerate(range(0, tokens, shard_tokens)):
        size = min(shard_tokens, tokens - start)
        ids = ((rng.zipf(1.3, size) - 1) % (VOCAB - 1) + 1).astype(np.uint16)
        lengths = rng.integers(50, 1000, size=size // 50 + 1)
        starts = np.concatenate([[0], np.cumsum(lengths)])
        starts = starts[starts < size].astype(np.int64)
        ids[starts] = 0
        with TokenShardWriter(root / "shards", "val", index, VOCAB) as shard:
            shard.write_packed(PackedStream(ids, starts))
    index_committed_shards(root / "shards", "val")


def write_model(root: Path) -> None:
    """The fixed shape, seeded, and a byte-level BPE tokenizer of the same vocabulary."""
    import torch

    from lmforge.model.config import ModelConfig
    from lmforge.model.gpt import GPT
    from lmforge.model.weights import save_model_dir
    from lmforge.pipeline.sources.embedded import embedded_documents
    from lmforge.tokenizer.config import TokenizerConfig
    from lmforge.tokenizer.io import save_tokenizer
    from lmforge.tokenizer.train import train_bpe

    tok = train_bpe([d.text for d in embedded_documents()], TokenizerConfig(vocab_size=VOCAB))
    if tok.get_vocab_size() != VOCAB:
        raise SystemExit(f"the tokenizer has {tok.get_vocab_size()} ids, not {VOCAB}")
    save_tokenizer(tok, root / "tok", model_max_length=SHAPE["block_size"])
    torch.manual_seed(0)
    save_model_dir(GPT(ModelConfig(vocab_size=VOCAB, **SHAPE)), root / "pretrain" / "model")


def run_pool(root: Path, actors: int) -> dict:
    """Score the split on `actors` actors; the figures and what the run cost."""
    from lmforge.pipeline.cluster.process_stats import peak_rss_bytes, reset_peak_rss
    from lmforge.pipeline.evaluation.model_pool import ModelPool
    from lmforge.pipeline.evaluation.scoring_progress import ScoringProgress
    from lmforge.pipeline.stages.perplexity.stage import PerplexityConfig, _stream_figures
    from lmforge.pipeline.stages.perplexity.stream_scoring import StreamJob, score_stream
    from lmforge.pipeline.stages.perplexity.token_stream import plan_stream

    cfg = PerplexityConfig(actors=actors, threads_per_actor=1, device="cpu", batch_size=BATCH)
    spec = plan_stream(root / "shards", "val")
    block = SHAPE["block_size"]
    job = StreamJob(spec, block, block, BATCH, cfg.bootstrap_groups, {}, 0)
    reset_peak_rss()
    driver_cpu = time.process_time()
    busy, started = cpu_busy_seconds(), time.perf_counter()
    with ModelPool(cfg, root / "pretrain", root / "tok", section="eval.perplexity") as pool:
        progress = ScoringProgress(f"{actors} actor(s)", spec.n_tokens - 1, every_s=30)
        sums = score_stream(pool, job, BATCH * BATCHES_PER_CALL, progress)
        usage = pool.usage()
    wall = time.perf_counter() - started
    driver_cpu = time.process_time() - driver_cpu
    cpu_s = driver_cpu + sum(u["cpu_s"] for u in usage)
    return {
        "figures": _stream_figures(cfg, sums, {}),
        "bytes": sums.bytes,
        "tokens_per_s": round(progress.tokens_per_s(), 1),
        "wall_s": round(wall, 1),
        "machine_cores_busy": round((cpu_busy_seconds() - busy) / wall, 2),
        "cpu_s": round(cpu_s, 1),
        "driver_cpu_s": round(driver_cpu, 1),
        "tokens_per_cpu_s": round((spec.n_tokens - 1) / cpu_s, 1),
        "driver_peak_rss_mb": round((peak_rss_bytes() or 0) / 2**20),
        "actor_peak_rss_mb": [round(u["peak_rss"] / 2**20) for u in usage],
    }


def single_process(root: Path) -> dict:
    """Today's path in this (fresh) process: the whole split in memory, scored in one pass."""
    import torch

    from lmforge.model.perplexity import position_nll
    from lmforge.model.weights import load_model_dir
    from lmforge.pipeline.cluster.process_stats import peak_rss_bytes
    from lmforge.pipeline.probes.perplexity_math import document_sums
    from lmforge.tokenizer.dataset import TokenDataset

    torch.set_num_threads(1)
    model = load_model_dir(root / "pretrain" / "model")
    dataset = TokenDataset(root / "shards", "val", block_size=1)
    started, cpu = time.perf_counter(), time.process_time()
    ids = np.concatenate([np.asarray(s.tokens, dtype=np.int64) for s in dataset.shards])
    block = SHAPE["block_size"]
    losses = position_nll(model, torch.from_numpy(ids), block, block).numpy()
    document_sums(losses, dataset.doc_offsets)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "val_loss": float(losses.mean()),
        "tokens_per_s": round(losses.size / wall, 1),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "tokens_per_cpu_s": round(losses.size / cpu, 1),
        "peak_rss_mb": round((peak_rss_bytes() or 0) / 2**20),
    }


def rel_diff(a: dict, b: dict) -> float:
    return max(abs(a[k] - b[k]) / max(abs(a[k]), 1e-300) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", default="20M", help="validation ids (20M, 2000000...)")
    parser.add_argument("--shard-tokens", default="4M", help="ids per token shard")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-single-process", action="store_true")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument("--single-process", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single_process:  # the child that measures today's path
        print(json.dumps(single_process(args.single_process)))
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    tokens = parse_size(args.tokens)
    root = args.keep or Path(tempfile.mkdtemp(prefix="lmforge-eval-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(root, tokens, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))


def measure(root: Path, tokens: int, args: argparse.Namespace) -> dict:
    from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray

    write_split(root, tokens, parse_size(args.shard_tokens), args.seed)
    write_model(root)
    ensure_ray(None, num_cpus=args.cpus, workdir=root)
    try:
        one, two = run_pool(root, 1), run_pool(root, 2)
    finally:
        shutdown_ray()
    fits = tokens * SINGLE_PROCESS_BYTES_PER_TOKEN < available_bytes() / 2
    single = run_single_process(root, one) if fits and not args.no_single_process else None
    print_table(one, two, single)
    return {
        "bench": "eval_scale",
        "unit": "tokens/s",
        "tokens": tokens,
        "val_perplexity": one["figures"]["val_perplexity"],
        "rel_diff": rel_diff(
            {**one["figures"], "bytes": one["bytes"]}, {**two["figures"], "bytes": two["bytes"]}
        ),
        "tokens_per_s_1actor": one["tokens_per_s"],
        "tokens_per_s_2actors": two["tokens_per_s"],
        "scaling_2actors": round(two["tokens_per_s"] / one["tokens_per_s"], 3),
        "driver_peak_rss_mb": max(one["driver_peak_rss_mb"], two["driver_peak_rss_mb"]),
        "actor_peak_rss_mb": max(one["actor_peak_rss_mb"] + two["actor_peak_rss_mb"]),
        **{f"{key}_{n}": run[key] for n, run in ((1, one), (2, two)) for key in PER_RUN},
        "single_process": single,
    }


PER_RUN = ("wall_s", "cpu_s", "driver_cpu_s", "tokens_per_cpu_s", "machine_cores_busy")


def run_single_process(root: Path, pool_run: dict) -> dict:
    """Today's path measured in a fresh process, its loss against the pool's."""
    child = subprocess.run(
        [sys.executable, __file__, "--single-process", str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    single = json.loads(child.stdout.strip().splitlines()[-1])
    loss = pool_run["figures"]["val_loss"]
    single["rel_diff"] = abs(single["val_loss"] - loss) / loss
    return single


def print_table(one: dict, two: dict, single: dict | None) -> None:
    print(
        f"{'':>16}{'tok/s':>10}{'wall s':>8}{'CPU s':>8}{'tok/CPU-s':>11}{'busy':>6}"
        f"{'driver MB':>11}{'actor MB':>10}"
    )
    for name, run in (("1 actor", one), ("2 actors", two)):
        print(
            f"{name:>16}{run['tokens_per_s']:>10.0f}{run['wall_s']:>8}{run['cpu_s']:>8}"
            f"{run['tokens_per_cpu_s']:>11.0f}{run['machine_cores_busy']:>6}"
            f"{run['driver_peak_rss_mb']:>11}{max(run['actor_peak_rss_mb']):>10}"
        )
    if single:
        print(
            f"{'single process':>16}{single['tokens_per_s']:>10.0f}{single['wall_s']:>8}"
            f"{single['cpu_s']:>8}{single['tokens_per_cpu_s']:>11.0f}{'':>6}"
            f"{single['peak_rss_mb']:>11}{'-':>10}"
        )


if __name__ == "__main__":
    main()
