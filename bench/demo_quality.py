"""The demo's quality bar over several training seeds: `lmforge run preset=tiny train.seed=S`.

For each seed, a fresh workdir runs the whole tiny pipeline (as `make demo` does, with only the
seed changed) and the bar of the demo is checked on its artifacts:

- val perplexity (whole validation split) at most 0.5x the bigram baseline's;
- minimal-pair accuracy at least 0.7;
- greedy completions: no completion's most frequent word above half of its words, and no word
  4-gram repeated more than 3 times in one completion;
- top-p completions: word distinct-2 of their pooled words at least 0.5.

Four prompts decide the greedy bar, so a model that loops on one prompt in five passes or fails
it by luck; each seed's model is also scored on about 200 sentence starts of its validation split
(`greedy_loops.py`): the share of greedy completions that loop, with its 95% interval. Likewise
a pair within a nat of a tie decides the minimal-pair bar by luck, so each seed's pairs are also
counted by margin (`minimal_pair_margins.py`): right or wrong by more than a nat, or near a tie.

Prints a table, each seed's most repetitive greedy completion, loop rate and pair margins and,
last, one JSON line: {"bench": "demo_quality", "seeds": [...], per-seed figures (with that
completion, the "greedy_loops" and the "minimal_pair_margins" figures), the worst value of each
figure over the seeds, "met": {figure: bool}, "all_met": bool, "seconds": [...]}. With the
preset's sequence-level phase it takes about 4-9 minutes per seed on 2 cores of the Intel
machine, about 6-8 on a Zen 3 AMD EPYC and about 16 on the slower Zen 1 AMD one
(docs/training.md, "Why it is what it is").

    .venv/bin/python bench/demo_quality.py [--seeds 1337 0 1] [--override K=V ...]
        [--loop-prompts 200] [--keep DIR]

`--override` passes preset changes to every run (e.g. `train.max_steps=1200`), to try a preset
before it is written into `conf/preset/tiny.yaml`; `--keep` keeps the seeds' workdirs, to look
into a seed that misses (`lmforge status workdir=DIR/seed-S`, `minimal_pair_margins.py`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from greedy_loops import measure as greedy_loop_figures  # noqa: E402
from greedy_loops import stage_artifacts  # noqa: E402
from minimal_pair_margins import margin_counts, model_margins  # noqa: E402

BAR = {
    # figure: (worst-case direction, threshold)
    "val_to_bigram": ("max", 0.5),
    "minimal_pair_accuracy": ("min", 0.7),
    "greedy_max_top_word_share": ("max", 0.5),
    "greedy_max_word_4gram_count": ("max", 3),
    "top_p_word_distinct_2": ("min", 0.5),
}


def artifact_summary(artifact: Path) -> dict:
    """The summary in an artifact's manifest."""
    return json.loads((artifact / "manifest.json").read_text())["summary"]


def most_repetitive_greedy(samples: Path) -> str:
    """The greedy prompt and completion of `samples.jsonl` whose most frequent word 4-gram
    occurs most often: the one that decides `greedy_max_word_4gram_count` (the workdir is gone
    after the bench, so a failing seed shows what its model wrote)."""
    from lmforge.pipeline.probes.diversity import max_ngram_count

    records = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    greedy = [r for r in records if r["mode"] == "greedy"]
    worst = max(greedy, key=lambda r: max_ngram_count(r["completion"].split(), 4))
    return worst["prompt"] + worst["completion"]


def run_seed(root: Path, seed: int, overrides: list[str], loop_prompts: int) -> dict:
    """Train and evaluate the tiny preset with `train.seed=seed`; its bar figures and seconds."""
    workdir = root / f"seed-{seed}"
    started = time.time()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lmforge.pipeline.cli.main",
            "run",
            "preset=tiny",
            f"train.seed={seed}",
            f"workdir={workdir}",
            *overrides,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    seconds = time.time() - started
    artifacts = stage_artifacts(workdir)
    ppl, sample = artifact_summary(artifacts["perplexity"]), artifact_summary(artifacts["sample"])
    return {
        "val_perplexity": ppl["val_perplexity"],
        "val_to_bigram": ppl["val_perplexity"] / ppl["bigram_perplexity"],
        "minimal_pair_accuracy": ppl["minimal_pair_accuracy"],
        "greedy_max_top_word_share": sample["greedy_max_top_word_share"],
        "greedy_max_word_4gram_count": sample["greedy_max_word_4gram_count"],
        "top_p_word_distinct_2": sample["top_p_word_distinct_2"],
        "seconds": round(seconds, 1),
        "most_repetitive_greedy": most_repetitive_greedy(artifacts["sample"] / "samples.jsonl"),
        "greedy_loops": greedy_loop_figures(artifacts, loop_prompts),
        "minimal_pair_margins": margin_counts(model_margins(artifacts)),
    }


def judge(per_seed: dict[int, dict]) -> tuple[dict[str, float], dict[str, bool]]:
    """The worst value of each figure of `BAR` over the seeds, and whether it meets the bar."""
    worst, met = {}, {}
    for name, (direction, threshold) in BAR.items():
        values = [figures[name] for figures in per_seed.values()]
        worst[name] = max(values) if direction == "max" else min(values)
        met[name] = worst[name] <= threshold if direction == "max" else worst[name] >= threshold
    return worst, met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1337, 0, 1])
    parser.add_argument(
        "--override", nargs="*", default=[], metavar="KEY=VALUE", help="preset changes"
    )
    parser.add_argument(
        "--loop-prompts",
        type=int,
        default=200,
        help="validation sentence starts for each seed's greedy loop rate (greedy_loops.py)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each seed's workdir as DIR/seed-S (default: a temporary directory, removed)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lmforge-bench-demo-") as tmp:
        root = args.keep or Path(tmp)
        per_seed = {
            seed: run_seed(root, seed, args.override, args.loop_prompts) for seed in args.seeds
        }
    print(f"{'seed':>6}" + "".join(f"{name[:22]:>24}" for name in BAR) + f"{'seconds':>9}")
    for seed, figures in per_seed.items():
        cells = "".join(f"{figures[name]:>24.3f}" for name in BAR)
        print(f"{seed:>6}{cells}{figures['seconds']:>9.0f}")
    for seed, figures in per_seed.items():
        print(
            f"seed {seed}, most repetitive greedy completion: {figures['most_repetitive_greedy']!r}"
        )
        loops = figures["greedy_loops"]
        low, high = loops["greedy_loop_rate_ci"]
        print(
            f"seed {seed}, greedy loop rate over {loops['greedy_loop_prompts']} prompts: "
            f"{loops['greedy_loop_rate']:.3f} (95% {low:.3f}-{high:.3f})"
        )
        pairs = figures["minimal_pair_margins"]
        print(
            f"seed {seed}, minimal pairs: {pairs['right']} of {pairs['pairs']} right, "
            f"{pairs['sure_right']} by more than {pairs['tie_nats']:g} nat, "
            f"{pairs['sure_wrong']} wrong by more, within it: {pairs['near_ties']}"
        )
    worst, met = judge(per_seed)
    result = {
        "bench": "demo_quality",
        "seeds": args.seeds,
        "per_seed": {str(seed): figures for seed, figures in per_seed.items()},
        "worst": {name: round(value, 4) for name, value in worst.items()},
        "met": met,
        "all_met": all(met.values()),
        "seconds": [figures["seconds"] for figures in per_seed.values()],
    }
    if args.override:
        result["overrides"] = args.override
    print(json.dumps(result))


if __name__ == "__main__":
    main()
