"""`clean` at scale: a synthetic corpus of N documents, filters off, exact + MinHash dedup on.

Generates (seeded, never committed) `.jsonl.zst` files with `bench/corpus_synth.py`'s generator
(5% exact and 20% near copies), then runs the real `clean` stage in this process as its
coordinator (`pipeline/estimate/calibration/clean_in_process.py`, as the `clean` calibration case
does), on a local Ray with `--cpus` CPUs, and reports:

- `wall_s` and `lmforge` (documents/s) of the stage;
- `coordinator_peak_rss_mb` and `coordinator_read_mb`: this process over the stage (its peak is
  reset at the stage's start; bytes read are `rchar` of /proc/self/io);
- `task_peak_rss_mb`: the largest peak of any task (each task hands memory that earlier tasks
  freed back to the OS, then resets its VmHWM to its RSS then), and per step;
- `task_rss_rise_mb`: the largest rise of a task's peak over its RSS at its start (what a reused
  worker still held from earlier tasks left out), and per step; `rise_growth` compares it across
  sizes as `rss_growth` compares the peaks;
- `max_object_mb` / `task_object_fetch_mb`: the largest object Ray held, and the largest one a
  task had a reference to, polled every second from Ray's memory summary (arguments small enough
  to travel inline with a task never reach the object store and are not seen);
- `cpu_cores_used`: busy CPU time of the whole machine (/proc/stat: every process, Ray's
  included) over the stage's wall time;
- `subset_identical` (`--check-subset`): the removed set and the kept id of every removal equal
  the single-process algorithm's (`pipeline/dedup/in_memory.py`) on the first `--subset-docs`
  documents, and so do the copies of each line that paragraph dedup (on, as by default) removed
  (`paragraph_removed`: how many).

Before the first size, the stage runs once, untimed, on 20k documents, so Ray's worker start-up
counts in no size. `--sizes 1M,3M,10M` runs each size and prints how time and peak memory grow
(the JSON line is the largest size's, with `time_growth` and `rss_growth` against the
smallest).

    .venv/bin/python bench/clean_scale.py [--docs 10000000] [--sizes 1M,3M,10M] [--cpus 2]
        [--check-subset] [--subset-docs 1000000] [--files 32] [--words 32] [--keep DIR]
        [--corpus-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import ray

from lmforge.pipeline.estimate.calibration.clean_in_process import run_clean
from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

SIZE_RE = re.compile(r"\|\s*([\d.]+) B\s*\|\s*(\w+)\s*\|")


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in "KMG" else text) * scale)


class ObjectWatch(threading.Thread):
    """Polls Ray's memory summary: the largest object, and the largest a task referenced."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.largest = self.largest_in_task = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        from ray._private.internal_api import memory_summary

        while not self.stop.wait(1.0):
            try:
                text = memory_summary(stats_only=False, num_entries=20)
            except Exception:  # the summary is best effort while tasks come and go
                continue
            for size, kind in SIZE_RE.findall(text):
                self.largest = max(self.largest, float(size))
                if "TASK" in kind.upper() or kind == "PINNED_IN_MEMORY":
                    self.largest_in_task = max(self.largest_in_task, float(size))


def removals(artifact: Path) -> dict[str, tuple[str, str]]:
    import pyarrow.parquet as pq

    table = pq.read_table(artifact / "duplicates.parquet")
    return {r["id"]: (r["kept_id"], r["kind"]) for r in table.to_pylist()}


def corpus_of(root: Path, docs: int, args: argparse.Namespace) -> tuple[Path, bool]:
    """(the corpus of `docs` documents, whether to delete it after use): generated under `root`,
    or found in `--corpus-dir` (generated there once: the same seed gives the same files)."""
    files = max(1, min(args.files, docs))
    if args.corpus_dir is None:
        corpus = root / f"corpus-{docs}"
    else:
        corpus = args.corpus_dir / f"corpus-{docs}-files{files}-words{args.words}"
        if (corpus / "planted.json").exists():  # written last, after every file
            return corpus, False
    started = time.perf_counter()
    synthesize(corpus, docs, files, seed=0, words=args.words, workers=args.cpus)
    size_mb = sum(p.stat().st_size for p in corpus.glob("*.jsonl.zst")) / 2**20
    took = time.perf_counter() - started
    print(f"{docs} documents: {size_mb:.0f} MB of .jsonl.zst written in {took:.0f}s")
    return corpus, args.corpus_dir is None


def paragraph_removals(artifact: Path) -> dict[int, int]:
    """unit hash -> copies paragraph dedup removed, from the artifact."""
    import pyarrow.parquet as pq

    found: dict[int, int] = {}
    for row in pq.read_table(artifact / "paragraph_duplicates.parquet").to_pylist():
        found[row["hash"]] = found.get(row["hash"], 0) + row["removed"]
    return found


def check_subset(root: Path, docs: int, args: argparse.Namespace) -> tuple[bool, int]:
    """Whether the stage's removals on `docs` documents (documents, then lines) equal the
    single-process algorithm's; the lines removed."""
    from lmforge.pipeline.dedup.in_memory import in_memory_paragraph_removals, in_memory_removals
    from lmforge.pipeline.sources.data_config import DedupConfig
    from lmforge.pipeline.sources.files import read_source

    corpus, _ = corpus_of(root, docs, args)
    workdir = root / "subset-run"
    workdir.mkdir()
    summary, _, _ = run_clean(corpus, workdir, ["data.val_fraction=0.05"])
    artifact = next((workdir / "store" / "clean").glob("[!.]*"))
    ids, texts = [], []
    for path in sorted(corpus.glob("*.jsonl.zst")):
        for doc in read_source(str(path)):
            ids.append(doc.id)
            texts.append(doc.text)
    expected = in_memory_removals(ids, texts, DedupConfig())
    kept = [i for i, doc_id in enumerate(ids) if doc_id not in expected]
    lines = in_memory_paragraph_removals(
        [ids[i] for i in kept], [texts[i] for i in kept], DedupConfig().paragraph
    )
    del texts
    expected_lines: dict[int, int] = {}
    for hashes in lines.values():
        for found_hash in hashes:
            expected_lines[found_hash] = expected_lines.get(found_hash, 0) + 1
    found = removals(artifact)
    found_lines = paragraph_removals(artifact)
    print(f"subset: {len(found)} removals by the stage, {len(expected)} in memory")
    print(
        f"subset: {sum(found_lines.values())} lines removed by the stage, "
        f"{sum(expected_lines.values())} in memory"
    )
    return found == expected and found_lines == expected_lines, sum(found_lines.values())


def warm_up(root: Path, args: argparse.Namespace) -> None:
    """Run the stage once on a small corpus, untimed: Ray starts its worker processes and they
    import the stage's modules on first use, a few seconds that would otherwise count in the
    first size's time only and hide part of the growth between sizes."""
    corpus = root / "warm-up"
    synthesize(corpus, 20_000, min(args.files, 4), seed=1, words=args.words)
    workdir = root / "warm-up-run"
    workdir.mkdir()
    run_clean(corpus, workdir, ["data.val_fraction=0.05"])
    shutil.rmtree(corpus)
    shutil.rmtree(workdir)


def measure(root: Path, docs: int, args: argparse.Namespace) -> dict:
    corpus, generated = corpus_of(root, docs, args)
    size_mb = sum(p.stat().st_size for p in corpus.glob("*.jsonl.zst")) / 2**20
    workdir = root / f"run-{docs}"
    workdir.mkdir()
    watch = ObjectWatch()
    watch.start()
    summary, wall, cores = run_clean(corpus, workdir, ["data.val_fraction=0.05"])
    watch.stop.set()
    if generated:
        shutil.rmtree(corpus)
    shutil.rmtree(workdir / "store")
    tasks = summary["task_peak_rss_mb"]
    return {
        "docs": docs,
        "input_mb": round(size_mb, 1),
        "wall_s": round(wall, 1),
        "lmforge": round(docs / wall, 1),
        "coordinator_peak_rss_mb": summary["coordinator_peak_rss_mb"],
        "task_peak_rss_mb": max(tasks.values()),
        "task_peak_rss_mb_by_step": tasks,
        "task_rss_rise_mb": max(summary["task_rss_rise_mb"].values()),
        "task_rss_rise_mb_by_step": summary["task_rss_rise_mb"],
        "max_object_mb": round(watch.largest / 2**20, 3),
        "task_object_fetch_mb": round(watch.largest_in_task / 2**20, 3),
        "coordinator_read_mb": summary["coordinator_read_mb"],
        "cpu_cores_used": round(cores, 2),
        "read_units": summary["read_units"],
        "step_seconds": summary["step_seconds"],
        "removed": {k: v for k, v in summary["dropped_by_reason"].items() if v},
        "paragraph_dedup": summary["paragraph_dedup"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default="10000000", help="documents (10M, 1000000...)")
    parser.add_argument("--sizes", help="comma-separated sizes, e.g. 1M,3M,10M (overrides --docs)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--files", type=int, default=32, help=".jsonl.zst files of the corpus")
    parser.add_argument("--words", type=int, default=32, help="mean words per document")
    parser.add_argument("--check-subset", action="store_true")
    parser.add_argument("--subset-docs", default="1000000")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument(
        "--corpus-dir", type=Path, help="generate each corpus here once and reuse it in later runs"
    )
    args = parser.parse_args()
    sizes = [parse_size(s) for s in (args.sizes or args.docs).split(",")]
    root = args.keep or Path(tempfile.mkdtemp(prefix="lmforge-clean-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, logging_level="WARNING")
    try:
        warm_up(root, args)
        rows = [measure(root, docs, args) for docs in sizes]
        identical = lines = None
        if args.check_subset:
            identical, lines = check_subset(root, parse_size(args.subset_docs), args)
    finally:
        ray.shutdown()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    header = f"{'docs':>10}{'wall s':>9}{'docs/s':>10}{'coord MB':>10}{'task MB':>9}{'cores':>7}"
    print(f"{header}  step seconds")
    for row in rows:
        print(
            f"{row['docs']:>10}{row['wall_s']:>9}{row['lmforge']:>10.0f}"
            f"{row['coordinator_peak_rss_mb']:>10}{row['task_peak_rss_mb']:>9}"
            f"{row['cpu_cores_used']:>7}  "
            + " ".join(f"{step} {t:.0f}" for step, t in row["step_seconds"].items())
        )
    result = {"bench": "clean_scale", **rows[-1], "subset_identical": identical}
    if lines is not None:
        result["subset_paragraph_removed"] = lines
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        result["sizes"] = [r["docs"] for r in rows]
        result["time_growth"] = round(last["wall_s"] / first["wall_s"], 2)
        result["rss_growth"] = round(
            max(last["task_peak_rss_mb"], last["coordinator_peak_rss_mb"])
            / max(first["task_peak_rss_mb"], first["coordinator_peak_rss_mb"]),
            3,
        )
        result["rise_growth"] = round(last["task_rss_rise_mb"] / first["task_rss_rise_mb"], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
