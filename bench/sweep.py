"""A learning-rate sweep against the same runs one after another: what sharing and early stopping
save. Four learning rates of the `tiny` preset at `train.max_steps=400`, the two diverging ones
listed first. Three cases, each in a fresh workdir:

- `early`: one `lmforge sweep train.lr=... --early-stop` (ASHA on val_loss);
- `sweep`: the same sweep without `--early-stop`;
- `sequential`: four `lmforge run train.lr=X` one after another in one workdir (they share
  `clean`, `train_tokenizer`, `tokenize` and `sample_index` through the cache, as a user's would).

The cases run in a rotating order, round after round (`--rounds`), so the machine's drift from
hour to hour does not pick the winner; each case's wall time is its median over the rounds.
ASHA compares the variants at the same step, so they must train side by side: the sweeps give
each variant one training worker and let Ray run `--concurrent` of them at once (the CPUs of the
local runtime set to that number, each training thread time-sliced on the machine's cores);
the sequential runs keep the preset's two workers, which fill the machine one run at a time.

Prints one line per case and round, then one JSON line: {"bench": "sweep", "variants",
"shared_stage_runs" (the most runs of any stage key that several variants share, within a
sweep), "stopped_early", "wall_s" (the early-stopping sweep), "sweep_wall_s", "sequential_wall_s",
"ratio" (sequential / early-stopping sweep), "ratio_no_early_stop" (sequential / sweep),
"rounds", "walls"}. Goals: shared_stage_runs 1, ratio >= 1.3, ratio_no_early_stop >= 0.95.
At full size about 35-40 minutes a round on 2 vCPUs.

    .venv/bin/python bench/sweep.py [--rounds 1] [--quick] [--keep DIR]

`--quick` runs the same cases on the tests' small model for 40 steps on a 40-document corpus
(a few minutes): a check that the bench works, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LRS = ["1.0", "0.3", "3e-3", "1e-3"]
"""The two diverging learning rates first, then the preset's (3e-3) and a lower one."""
FULL = ["preset=tiny", "train.max_steps=400"]
QUICK_MODEL = ["model.d_model=64", "model.n_layer=2", "model.d_ff=256", "model.block_size=64"]
QUICK = [
    "preset=tiny",
    *QUICK_MODEL,
    "train.max_steps=40",
    "train.checkpoint_every=20",
    "train.sequence_unlikelihood_steps=5",
    "eval.perplexity.max_tokens=4096",
    "eval.sample.max_new_tokens=16",
    "eval.harm.num_prompts=4",
    "eval.harm.bias_samples=0",
    "eval.harm.pii_samples=4",
]
CASES = ("early", "sweep", "sequential")


def lmforge(*args: str) -> float:
    """Run `lmforge ARGS` to its end (its output discarded); its wall seconds."""
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "lmforge.pipeline.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if done.returncode not in (0, 1):  # 1: a variant failed (a diverging one may), still timed
        raise SystemExit(f"lmforge {' '.join(args)} exited {done.returncode}:\n{done.stdout}")
    return time.time() - started


def small_corpus(directory: Path, documents: int = 40) -> list[str]:
    """Overrides pointing `clean` at `documents` documents of the embedded corpus (--quick)."""
    from lmforge.pipeline.sources.embedded import embedded_documents

    directory.mkdir(parents=True, exist_ok=True)
    corpus = directory / "small-corpus.jsonl"
    texts = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000][:documents]
    lines = (json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    corpus.write_text("".join(lines), encoding="utf-8")
    return [f"data.paths=[{corpus}]", "data.val_fraction=0.3"]


def run_case(case: str, workdir: Path, base: list[str], concurrent: int) -> float:
    if case == "sequential":
        return sum(lmforge("run", *base, f"train.lr={lr}", f"workdir={workdir}") for lr in LRS)
    sweep = [
        "sweep",
        *base,
        "train.num_workers=1",
        f"cluster.num_cpus={concurrent}",
        f"train.lr={','.join(LRS)}",
        f"workdir={workdir}",
    ]
    return lmforge(*sweep, *(["--early-stop"] if case == "early" else []))


def sweep_figures(workdir: Path) -> dict:
    """Stage runs of the keys several variants share (the most of any), and variants stopped."""
    record = json.loads(next((workdir / "sweeps").glob("sweep-*.json")).read_text())
    keys: dict[tuple[str, str], set[str]] = {}
    for variant in record["variants"]:
        for stage, key in variant["stages"].items():
            keys.setdefault((stage, key), set()).add(variant["variant"])
    shared = {item for item, owners in keys.items() if len(owners) > 1}
    runs: dict[tuple[str, str], int] = dict.fromkeys(shared, 0)
    for path in (workdir / "pipeline_runs").glob("*.json"):
        for stage in json.loads(path.read_text())["stages"]:
            item = (stage["stage"], stage["key"])
            if item in runs and stage["state"] == "ran":
                runs[item] += 1
    stopped = sum(1 for v in record["variants"] if v["state"] == "stopped")
    return {"shared_stage_runs": max(runs.values(), default=0), "stopped_early": stopped}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the three cases")
    parser.add_argument("--quick", action="store_true", help="a small model, 40 steps")
    parser.add_argument(
        "--concurrent", type=int, default=4, help="variants training at once in the sweeps"
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the workdirs in DIR")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {case: [] for case in CASES}
    figures: dict[str, list[dict]] = {"early": [], "sweep": []}
    with tempfile.TemporaryDirectory(prefix="lmforge-bench-sweep-") as tmp:
        root = args.keep or Path(tmp)
        base = list(FULL)
        if args.quick:
            base = [*QUICK, *small_corpus(root)]
        for round_ in range(args.rounds):
            order = CASES[round_ % 3 :] + CASES[: round_ % 3]
            for case in order:
                workdir = root / f"round{round_}-{case}"
                wall = run_case(case, workdir, base, args.concurrent)
                walls[case].append(wall)
                if case in figures:
                    figures[case].append(sweep_figures(workdir))
                print(f"round {round_} {case:<10} {wall:8.1f}s", flush=True)
    median = {case: statistics.median(values) for case, values in walls.items()}
    result = {
        "bench": "sweep",
        "variants": len(LRS),
        "shared_stage_runs": max(
            f["shared_stage_runs"] for f in figures["early"] + figures["sweep"]
        ),
        "stopped_early": min(f["stopped_early"] for f in figures["early"]),
        "wall_s": round(median["early"], 1),
        "sweep_wall_s": round(median["sweep"], 1),
        "sequential_wall_s": round(median["sequential"], 1),
        "ratio": round(median["sequential"] / median["early"], 3),
        "ratio_no_early_stop": round(median["sequential"] / median["sweep"], 3),
        "rounds": args.rounds,
        "walls": {case: [round(w, 1) for w in values] for case, values in walls.items()},
    }
    if args.quick:
        result["quick"] = True
    print(json.dumps(result))


if __name__ == "__main__":
    main()
