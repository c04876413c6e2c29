"""Token data at scale: a split of 100,000 small token shards, and a 2.4e8-window sample index.

Everything lives on tmpfs (`/dev/shm`, removed at the end) and is generated here, seeded:

1. `--shards` small synthetic shards (100-500 tokens each) written with `TokenShardWriter` by two
   processes, and the split index written from their infos, as `tokenize` does when it commits.
2. A fresh process opens the split (`TokenDataset`, the tiny preset's block size and window
   shift) and reads its first window: `ready_s`. It then reads `--reads` windows at random
   positions, so thousands of shards pass through its bounded set of open ones, and reports its
   open files (`/proc/self/fd`), memory mappings (`/proc/self/maps`) and VmRSS after them
   (`open_files`, `mappings`, `rss_mb`; goals < 256, < 1,000, < 300 MB; the process's figures
   after its imports alone are given beside them).
3. A fresh process builds a sample index of `--windows` windows (one epoch, uint32, shuffled in
   place in the memory-mapped file; `pipeline/estimate/calibration/index_build.py`, as the
   `sample_index` calibration case measures it): `index_build_s` and its peak RSS (VmHWM;
   `index_build_anon_mb` is its peak of anonymous memory, the rest being the file's pages).
4. Two rank processes at once each map the index and draw `--batches` steps of a 512-window
   global batch through `WindowSampler` (rank r of 2); `index_rss_mb_per_rank` is the larger
   VmRSS rise of the two, from before the map to after the last batch (goal < 100 MB).

CPU seconds of every child process are reported (`cpu_s`). Last line: one JSON object.

    .venv/bin/python bench/token_scale.py                 # the issue's size (~1 GB of tmpfs)
    .venv/bin/python bench/token_scale.py --quick         # 10,000 shards, 2.4e7 windows
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import uuid
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from lmforge.pipeline.estimate.calibration.index_build import (
    BLOCK,
    MAX_OFFSET,
    SEED,
    build_index,
    cpu_s,
    status_mb,
)

VOCAB = 32768
GLOBAL_BATCH, MICRO_BATCH, WORLD = 512, 8, 2


def _write_shards(args: tuple[str, range]) -> list:
    from lmforge.tokenizer.shards import TokenShardWriter

    directory, indices = args
    infos = []
    for k in indices:
        rng = np.random.default_rng([SEED, k])
        docs = [[0, *rng.integers(2, VOCAB, n).tolist()] for n in rng.integers(50, 250, 2)]
        with TokenShardWriter(directory, "train", k, VOCAB) as writer:
            writer.write_documents(docs)
        infos.append(writer.info)
    return infos


def write_split(directory: Path, shards: int) -> tuple[float, float]:
    """Write the shards with two processes and index them; seconds and CPU seconds taken."""
    from lmforge.tokenizer.split_index import write_split_index

    started, cpu = time.perf_counter(), cpu_s(resource.RUSAGE_CHILDREN)
    step = 1000
    chunks = [(str(directory), range(a, min(shards, a + step))) for a in range(0, shards, step)]
    pool = Pool(2)
    infos = [info for part in pool.imap(_write_shards, chunks) for info in part]
    pool.close()
    pool.join()  # reaped, so their CPU time counts in RUSAGE_CHILDREN
    write_split_index(directory, "train", infos)
    return time.perf_counter() - started, cpu_s(resource.RUSAGE_CHILDREN) - cpu


def _process_figures() -> dict:
    return {
        "open_files": len(os.listdir("/proc/self/fd")),
        "mappings": len(Path("/proc/self/maps").read_text().splitlines()),
        "rss_mb": round(status_mb("VmRSS"), 1),
    }


def child_dataset(directory: str, reads: int) -> dict:
    from lmforge.tokenizer.dataset import TokenDataset

    baseline = _process_figures()
    started = time.perf_counter()
    dataset = TokenDataset(directory, "train", BLOCK, MAX_OFFSET)
    dataset.window_at(0, 0)
    ready_s = time.perf_counter() - started
    rng = np.random.default_rng(SEED)
    picks = rng.integers(0, len(dataset), reads)
    shifts = rng.integers(0, MAX_OFFSET + 1, reads)
    started = time.perf_counter()
    checksum = sum(
        int(dataset.window_at(int(i), int(o))[0]) for i, o in zip(picks, shifts, strict=True)
    )
    return {
        "ready_s": round(ready_s, 3),
        "windows": len(dataset),
        "reads_per_s": round(reads / (time.perf_counter() - started)),
        "checksum": checksum,
        **_process_figures(),
        "after_imports": baseline,
        "cpu_s": cpu_s(),
    }


def child_rank(directory: str, rank: int, batches: int) -> dict:
    from lmforge.pipeline.training.data.sample_index import SampleIndex
    from lmforge.pipeline.training.data.sampler import WindowSampler

    before = status_mb("VmRSS")
    sampler = WindowSampler(SampleIndex(directory), GLOBAL_BATCH, MICRO_BATCH, rank, WORLD)
    drawn = 0
    for _ in range(batches):
        drawn += sum(len(mb.windows) for mb in sampler.next_step())
    return {
        "rank": rank,
        "windows_drawn": drawn,
        "rss_rise_mb": round(status_mb("VmRSS") - before, 1),
        "cpu_s": cpu_s(),
    }


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, text=True
    )


def _result(proc: subprocess.Popen) -> dict:
    out, _ = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a benchmark process failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--windows", type=float, default=2.4e8, help="windows of the index")
    parser.add_argument("--batches", type=int, default=10_000, help="steps drawn per rank")
    parser.add_argument("--reads", type=int, default=20_000, help="random windows read")
    parser.add_argument("--quick", action="store_true", help="10,000 shards, 2.4e7 windows")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, directory, number, *rest = args.child
        run = {"dataset": child_dataset, "build": build_index, "rank": child_rank}[kind]
        print(json.dumps(run(directory, int(number), *map(int, rest))))
        return
    if args.quick:
        args.shards, args.windows, args.batches = 10_000, 2.4e7, 2_000
    root = Path("/dev/shm") / f"lmforge-token-scale-{uuid.uuid4().hex[:8]}"
    try:
        print(json.dumps(measure(root, args)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path, args: argparse.Namespace) -> dict:
    data, index = root / "data", root / "index"
    data.mkdir(parents=True)
    write_s, write_cpu_s = write_split(data, args.shards)
    print(f"wrote {args.shards} shards in {write_s:.0f} s", file=sys.stderr)
    dataset = _result(_spawn("dataset", str(data), str(args.reads)))
    print(f"dataset: {dataset}", file=sys.stderr)
    build = _result(_spawn("build", str(index), str(int(args.windows))))
    print(f"index build: {build}", file=sys.stderr)
    ranks = [_spawn("rank", str(index), str(r), str(args.batches)) for r in range(WORLD)]
    rank_results = [_result(p) for p in ranks]
    print(f"ranks: {rank_results}", file=sys.stderr)
    rise = max(r["rss_rise_mb"] for r in rank_results)
    goals = {
        "ready_s": dataset["ready_s"] < 20,
        "open_files": dataset["open_files"] < 256,
        "mappings": dataset["mappings"] < 1000,
        "rss_mb": dataset["rss_mb"] < 300,
        "index_rss_mb_per_rank": rise < 100,
    }
    return {
        "bench": "token_scale",
        "shards": args.shards,
        "ready_s": dataset["ready_s"],
        "open_files": dataset["open_files"],
        "mappings": dataset["mappings"],
        "rss_mb": dataset["rss_mb"],
        "after_imports": dataset["after_imports"],
        "random_reads": args.reads,
        "reads_per_s": dataset["reads_per_s"],
        "index_windows": int(args.windows),
        "index_bytes": (index / "order.bin").stat().st_size,
        "index_build_s": build["build_s"],
        "index_build_peak_rss_mb": build["peak_rss_mb"],
        "index_build_imports_rss_mb": build["imports_rss_mb"],
        "index_build_anon_rise_mb": build["anon_rise_mb"],
        "batches": args.batches,
        "global_batch": GLOBAL_BATCH,
        "index_rss_mb_per_rank": rise,
        "write_s": round(write_s, 1),
        "cpu_s": {
            "write_shards": round(write_cpu_s, 1),
            "dataset": dataset["cpu_s"],
            "index_build": build["cpu_s"],
            "ranks": [r["cpu_s"] for r in rank_results],
        },
        "goals_met": goals,
        "all_met": all(goals.values()),
    }


if __name__ == "__main__":
    main()
