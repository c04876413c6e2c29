"""`clean_throughput.py --end-to-end`: the whole `clean` stage against datatrove's pipelines.

The corpus: `--mb` MB of JSONL in `--files` files, web-like pages recombined from Python's
documentation (`clean_throughput.build_corpus`: one page in twelve an exact copy of an earlier
one), ids numbered in corpus order.

- lmforge: the real `clean` stage (`pipeline/estimate/calibration/clean_in_process.py`) on a
  local Ray runtime started with the project's helper (`ensure_ray`) and given `--cpus` CPUs:
  read -> chain -> exact + MinHash dedup (20 bands x 5 rows, Jaccard >= 0.6) -> zstd Parquet
  shards, with every exclusion recorded.
  The comparison runs Gopher quality, Gopher repetition and C4 only (the other steps switched off
  with `data.filters.<step>.enabled=false`, and paragraph dedup with
  `data.dedup.paragraph.enabled=false`: datatrove's pipeline has neither); exact dedup stays on,
  counted against lmforge.
- datatrove: `LocalPipelineExecutor` pipelines with `--cpus` workers: JsonlReader -> Gopher
  quality -> Gopher repetition -> C4 -> JsonlWriter (uncompressed) -> MinhashDedupSignature, then
  MinhashDedupBuckets, MinhashDedupCluster, and JsonlReader -> MinhashDedupFilter -> ParquetWriter
  (5-grams, its default 14 buckets x 8 hashes: `NEAR`). It runs under $DATATROVE_PYTHON as a child
  process (`--datatrove-side`).

CPU time counts every process. lmforge: /proc of this process's tree (`cpu_accounting.py`: the
driver, GCS, raylet, dashboard, every worker; the stage's workers live to its end) over the
stage, Ray started and its workers up beforehand; `ratio_with_startup` counts Ray's start and the
MLflow store's creation too. datatrove: the child's and its workers' rusage, less the child's
interpreter start and imports (also counted in `ratio_with_startup`); the bench makes itself the
child subreaper so a worker orphaned by its pool still counts. `agreement`: the share of documents
both keep or both drop. `scaling_2cpu`: the stage's wall-clock documents/s with Ray given 2 CPUs
over 1 CPU. `mb_per_cpu_s`: MB of JSONL per CPU-second of the stage with the full default chain,
Ray start-up excluded, with each filter's CPU seconds (`filter_cpu_s`, from the chain's counts)
and paragraph dedup's share of the stage's CPU seconds (`paragraph_dedup_cpu_share`: its
hashing in the filter tasks, its counting tasks and its removal in the split tasks, over
`full_chain_cpu_s`).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from clean_throughput import build_corpus

SAME_STEPS_OFF = ("normalize", "length", "language", "blocklist", "toxicity", "pii")
"""lmforge's steps that datatrove's pipeline does not run (and paragraph dedup: `SAME_DEDUP`)."""
SAME_DEDUP = ("data.dedup.paragraph.enabled=false",)
NEAR = {"n_grams": 5, "num_buckets": 14, "hashes_per_bucket": 8}
"""datatrove's MinHash settings, its defaults: it has no verification step, and its 14 x 8 S-curve
removes what lmforge's 20 x 5 verified at Jaccard 0.6 removes (98.5% agreement among the filters'
survivors, where 20 x 5 unverified also removes pairs near 0.4 and agrees on 91%)."""


def write_corpus(out: Path, mb: float, files: int, seed: int) -> tuple[int, float]:
    """About `mb` MB of JSONL pages in `files` files; (documents, MB written)."""
    sample = build_corpus(500, seed, mixed=True)
    mean = sum(len(json.dumps({"id": i, "text": t})) for i, t in sample) / len(sample)
    corpus = build_corpus(int(mb * 2**20 / mean) + 1, seed, mixed=True)
    out.mkdir(parents=True)
    per_file = -(-len(corpus) // files)
    for f in range(files):
        with open(out / f"part-{f:04d}.jsonl", "w", encoding="utf-8") as handle:
            for i, (_, text) in enumerate(corpus[f * per_file : (f + 1) * per_file]):
                record = {"id": f"doc{f * per_file + i:08d}", "text": text}
                handle.write(json.dumps(record) + "\n")
    size = sum(p.stat().st_size for p in out.iterdir()) / 2**20
    return len(corpus), size


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process, so their CPU time is not lost."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_datatrove(python: str, corpus: Path, work: Path, cpus: int, files: int) -> dict:
    """Kept ids, CPU seconds (all processes) and start-up CPU seconds of datatrove's pipelines."""
    before, started = children_cpu_seconds(), time.perf_counter()
    argv = [python, __file__, "--datatrove-side", str(corpus), str(work), str(cpus), str(files)]
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - started
    while True:  # reap workers orphaned to this subreaper (no Ray runs now)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if done.returncode != 0:
        raise SystemExit(f"datatrove's pipelines failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    import pyarrow.parquet as pq

    kept = set()
    for path in (work / "out").glob("*.parquet"):
        kept.update(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    passed = set()  # the filters' survivors, before MinHash
    for path in (work / "filtered").glob("*.jsonl"):
        with open(path, encoding="utf-8") as lines:
            passed.update(json.loads(line)["id"] for line in lines)
    return {
        "kept": kept,
        "passed": passed,
        "cpu_s": children_cpu_seconds() - before,
        "startup_cpu_s": report["startup_cpu_s"],
        "wall_s": wall,
    }


def datatrove_side(corpus: str, work: str, cpus: int, files: int) -> None:
    """Runs under datatrove's interpreter: the four pipelines; prints its start-up CPU time."""
    os.environ["TQDM_DISABLE"] = "1"
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter, ParquetWriter
    from datatrove.utils.logging import logger
    from dedup_throughput import datatrove_hash_config

    logger.remove()  # datatrove logs every stage at INFO
    startup = resource.getrusage(resource.RUSAGE_SELF)
    config = MinhashConfig(**NEAR, hash_config=datatrove_hash_config())
    filtered, sigs, buckets, clusters = (f"{work}/{d}" for d in ("filtered", "sigs", "b", "c"))

    def run(name: str, pipeline: list, tasks: int) -> None:
        LocalPipelineExecutor(
            pipeline=pipeline,
            tasks=tasks,
            workers=min(cpus, tasks),
            logging_dir=f"{work}/logs/{name}",
            start_method="fork",
        ).run()

    run(
        "signatures",
        [
            JsonlReader(corpus),
            GopherQualityFilter(),
            GopherRepetitionFilter(),
            C4QualityFilter(),
            JsonlWriter(filtered, compression=None),
            MinhashDedupSignature(output_folder=sigs, config=config),
        ],
        files,
    )
    run("buckets", [MinhashDedupBuckets(sigs, buckets, config=config)], config.num_buckets)
    run("clusters", [MinhashDedupCluster(buckets, clusters, config=config)], 1)
    run(
        "filter",
        [JsonlReader(filtered), MinhashDedupFilter(clusters), ParquetWriter(f"{work}/out")],
        files,
    )
    print(json.dumps({"startup_cpu_s": startup.ru_utime + startup.ru_stime}))


def run_lmforge(
    corpus: Path,
    work: Path,
    cpus: int,
    off: tuple[str, ...],
    split_mb: float,
    extra: tuple[str, ...] = (),
) -> dict:
    """The `clean` stage on a fresh local Ray with `cpus` CPUs: its summary, kept ids, wall
    seconds and CPU seconds of the process tree (over the stage, and with start-up)."""
    import pyarrow.parquet as pq
    import ray
    from cpu_accounting import TreeCpu

    from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray
    from lmforge.pipeline.estimate.calibration.clean_in_process import (
        filters_off,
        prepare_clean_stage,
        run_clean_stage,
    )

    work.mkdir(parents=True)
    overrides = [
        f"data.paths=[{corpus}/*.jsonl]",
        "preset=base",  # the web-text thresholds of conf/data/default.yaml, as datatrove's
        "data.canaries.enabled=false",
        f"data.read_split_mb={split_mb:g}",
    ]
    with_startup = TreeCpu()
    task = prepare_clean_stage(work, overrides + filters_off(*off) + list(extra))
    os.environ.setdefault("RAY_worker_niceness", "0")  # as datatrove's workers (Ray: 15)
    ensure_ray(None, num_cpus=cpus, workdir=work)
    try:
        ray.get([ray.remote(num_cpus=1)(lambda: None).remote() for _ in range(cpus)])
        time.sleep(2.0)  # Ray's start-up settles (workers registered) before the stage counts
        stage = TreeCpu()
        summary, artifact, wall = run_clean_stage(task)
        cpu_s, all_cpu_s = stage.seconds, with_startup.seconds
    finally:
        shutdown_ray()
    kept = set()
    for path in artifact.glob("*.parquet"):
        if path.name.startswith(("train-", "val-")):
            kept.update(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    excluded = pq.read_table(artifact / "excluded.parquet", columns=["id", "reason"])
    duplicates = pq.read_table(artifact / "duplicates.parquet", columns=["id", "kind"])
    reasons = dict(zip(*excluded.to_pydict().values(), strict=True))
    reasons.update(zip(*duplicates.to_pydict().values(), strict=True))
    return {
        "summary": summary,
        "kept": kept,
        "reasons": reasons,
        "wall_s": wall,
        "cpu_s": cpu_s,
        "all_s": all_cpu_s,
    }


def disagreements(ours: dict, theirs: dict, ids: list[str]) -> Counter:
    """(lmforge's reason or kept, datatrove's step or kept) of the documents decided otherwise."""
    found: Counter = Counter()
    for i in ids:
        if (i in ours["kept"]) != (i in theirs["kept"]):
            dt = (
                "kept" if i in theirs["kept"] else "minhash" if i in theirs["passed"] else "filters"
            )
            found[(ours["reasons"].get(i, "kept"), dt)] += 1
    return found


def end_to_end(args) -> dict:
    """Every run of the end-to-end mode; the JSON line's fields."""
    become_subreaper()
    root = Path(tempfile.mkdtemp(prefix="lmforge-clean-e2e-"))
    try:
        return _measure(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(root: Path, args) -> dict:
    corpus = root / "corpus"
    n, mb = write_corpus(corpus, args.mb, args.files, args.seed)
    print(f"corpus: {n} documents, {mb:.1f} MB of JSONL in {args.files} files")
    python = os.environ.get("DATATROVE_PYTHON", "/tmp/dtvenv/bin/python")
    theirs = run_datatrove(python, corpus, root / "datatrove", args.cpus, args.files)
    split_mb = mb / args.units
    runs: dict[int, list[dict]] = {args.cpus: [], 1: []}
    for r in range(args.repeats):  # alternated, the best wall time of each counts
        for cpus in runs:
            work = root / f"same-{cpus}cpu-{r}"
            runs[cpus].append(run_lmforge(corpus, work, cpus, SAME_STEPS_OFF, split_mb, SAME_DEDUP))
    ours, one = runs[args.cpus][0], min(runs[1], key=lambda run: run["wall_s"])
    best_wall = min(run["wall_s"] for run in runs[args.cpus])
    full = run_lmforge(corpus, root / "full", args.cpus, (), split_mb)
    ids = [f"doc{i:08d}" for i in range(n)]
    differ = disagreements(ours, theirs, ids)
    dt_cpu = theirs["cpu_s"] - theirs["startup_cpu_s"]
    filters = {k: v["cpu_seconds"] for k, v in full["summary"]["filters"].items()}
    paragraph = full["summary"]["paragraph_dedup"]
    print(f"lmforge:   {n / ours['cpu_s']:7.0f} docs/CPU-s, kept {len(ours['kept'])}")
    print(f"datatrove: {n / dt_cpu:7.0f} docs/CPU-s, kept {len(theirs['kept'])}")
    print(f"decided otherwise (lmforge, datatrove): {dict(differ.most_common(8))}")
    print(
        f"wall s with {args.cpus} CPUs {[round(r['wall_s'], 1) for r in runs[args.cpus]]}, "
        f"with 1 CPU {[round(r['wall_s'], 1) for r in runs[1]]}"
    )
    print(
        f"full chain: {mb / full['cpu_s']:.3f} MB/CPU-s over {full['cpu_s']:.1f} CPU-s, "
        f"of which the filters' {filters}, paragraph dedup's {paragraph['cpu_seconds']}"
    )
    return {
        "bench": "clean_throughput",
        "mode": "end_to_end",
        "unit": "documents per CPU-second",
        "docs": n,
        "input_mb": round(mb, 1),
        "cpus": args.cpus,
        "lmforge": round(n / ours["cpu_s"], 1),
        "reference": round(n / dt_cpu, 1),
        "ratio": round(dt_cpu / ours["cpu_s"], 2),
        "ratio_with_startup": round(theirs["cpu_s"] / ours["all_s"], 2),
        "agreement": round(1 - sum(differ.values()) / n, 4),
        "scaling_2cpu": round(one["wall_s"] / best_wall, 2) if args.cpus == 2 else None,
        "wall_docs_per_s": {
            "lmforge": round(n / best_wall, 1),
            "lmforge_1cpu": round(n / one["wall_s"], 1),
            "reference": round(n / theirs["wall_s"], 1),
        },
        "mb_per_cpu_s": round(mb / full["cpu_s"], 3),
        "filter_cpu_s": filters,
        "full_chain_cpu_s": round(full["cpu_s"], 1),
        "paragraph_dedup_cpu_share": round(paragraph["cpu_seconds"] / full["cpu_s"], 4),
        "paragraph_dedup": paragraph,
    }


if __name__ == "__main__" and sys.argv[1:2] == ["--datatrove-side"]:
    corpus_dir, work_dir, n_cpus, n_files = sys.argv[2:6]
    datatrove_side(corpus_dir, work_dir, int(n_cpus), int(n_files))
