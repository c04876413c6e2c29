"""Does a scaling law fitted on small runs predict a larger one? lmforge's own commands fit a law
on a grid of runs over a real corpus, then one run at 3x the grid's largest budget is trained at
the fit's N* and its measured loss is set against the fit's prediction.

1. The corpus is real text that exists wherever lmforge is installed: the Python sources (code and
   docstrings) under the virtualenv's site-packages, deduplicated by content, written as JSONL
   shards (`scaling_corpus.py`), with ids that put whole packages in validation (files of one
   package share much of their text: a held-out score should not reward memorising it). The default
   clean chain is made for web prose and would drop most of it, so the bench runs clean with
   `CODE_FILTERS`: the language, Gopher quality and C4 filters off (code is not a natural language,
   its symbol and alphabetic-word ratios and its lines without terminal punctuation are what code
   looks like), Gopher repetition relaxed (closing brackets and `return` lines repeat, and so do
   the n-grams of identifiers and calls, `self.assertEqual(`: of 42 MB, the web thresholds kept 24%
   of the characters and these 56%, what normalisation removes included); length, normalisation,
   the blocklist and dedup as they are. `lmforge run --until tokenize` cleans and tokenizes it
   once; every later run takes those stages from the cache.
2. A short throughput probe: the `pretrain` calibration case's lmforge training steps
   (`pipeline/estimate/calibration/training_steps.py`) on the tiny preset's model and layout,
   tokens/s x its FLOPs per token (`training_flops_per_token`) = this machine's training FLOP/s.
   `size_budgets` turns it into a geometric ladder of budgets whose grid (4 shapes a budget) and
   held-out run fit what is left of the time target, each run paying `RUN_OVERHEAD_S` of
   start-up and evaluation besides its training.
3. The grid: `lmforge scaling run --budgets ... --sizes 4` (one sweep, two variants at a time on
   one worker each, stopping after `perplexity` on a capped validation slice), then
   `lmforge scaling fit --sweep latest`.
4. The held-out run: 3x the largest grid budget, at the family's shape nearest the fit's N*
   (within 10% of it, `heldout_shape`), with the grid's learning-rate rule and evaluation slice,
   trained by `lmforge run --until perplexity`. Its validation loss (nats per token) against the
   law's L(N, D) at its N and D is `rel_error`; `baseline_rel_error` is the same for a naive
   extrapolation, the grid's best loss per budget regressed on log C (`frontier_baseline`).

All the grid's and the held-out's runs train the tiny preset's model family with
`train.sequence_unlikelihood=0` (a decoding-loop objective, not part of the law).

    .venv/bin/python bench/scaling_law.py [--target-minutes 45] [--workdir DIR] [--target-mb 64]
    .venv/bin/python bench/scaling_law.py --corpus-only OUT [--target-mb 64]

prints progress, then last one JSON line: the grid (`budgets`, `shapes_per_budget`, `runs`), the
law (`E`, `A`, `B`, `alpha`, `beta`, the frontier's exponents `a`, `b` with their 90% bootstrap
intervals `a_interval`, `b_interval`), the held-out run (`heldout_budget`, `heldout_params`,
`n_star`, `predicted_loss`, `measured_loss`, `rel_error`, `baseline_rel_error`, `heldout_tokens`,
`heldout_epochs`: how many times it read the training split), the whole bench's `wall_s`, and the
fitted runs as `points` ([N, D, loss] each: `lmforge scaling fit --runs` reads them back as
`{"params", "tokens", "loss"}`), so that a line can be refitted without training again. Goals
(issue 67): rel_error <= 0.03, heldout_params within 10% of N*, at least 3 budgets x 4 shapes,
under 60 minutes on 2 vCPUs.
The method and the figures: docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings: corpus, JSON line
from scaling_corpus import (  # noqa: E402
    CODE_FILTERS,
    VAL_FRACTION,
    build_corpus,
    site_packages,
)
from scaling_result import machine_name, result_line  # noqa: E402

HELDOUT_FACTOR = 3.0


@dataclass(frozen=True, slots=True)
class BudgetLadder:
    budgets: list[float]
    heldout: float
    flops_per_s: float
    """The probe's sustained training FLOP/s on this machine."""
    planned_s: float


def size_budgets(
    probe_tokens_per_s: float,
    probe_flops_per_token: float,
    target_s: float,
    *,
    budgets: int = 3,
    shapes: int = 4,
    ratio: float = 3.0,
    overhead_s: float = 60.0,
) -> BudgetLadder:
    """A ladder of `budgets` budgets, each `ratio` times the last, whose grid (`shapes` runs a
    budget) and held-out run (3x the largest) fit `target_s` at the probe's FLOP/s, each run
    paying `overhead_s` of start-up and evaluation besides its training."""
    rate = probe_tokens_per_s * probe_flops_per_token
    runs = budgets * shapes + 1
    training_s = target_s - runs * overhead_s
    if rate <= 0 or training_s <= 0:
        raise ValueError(
            f"{runs} runs of {overhead_s:.0f}s overhead each do not fit {target_s:.0f}s: "
            "raise the target or lower the overhead"
        )
    weights = sum(ratio**k for k in range(budgets)) * shapes + HELDOUT_FACTOR * ratio ** (
        budgets - 1
    )
    smallest = rate * training_s / weights
    ladder = [smallest * ratio**k for k in range(budgets)]
    total = (shapes * sum(ladder) + HELDOUT_FACTOR * ladder[-1]) / rate + runs * overhead_s
    return BudgetLadder(ladder, HELDOUT_FACTOR * ladder[-1], rate, total)


RUN_OVERHEAD_S = 45.0
"""A run's seconds besides its training steps (start-up, the sweep's bookkeeping, `perplexity`
on the slice), two runs side by side: what `size_budgets` charges each."""
FIXED_S = 180.0
"""What the time target keeps for the fit and for the held-out run's start-up."""
MIN_BUDGET = 1.0e12
"""The smallest budget whose grid has 4 distinct shapes of the family, none under one layer: a
slower machine gets this ladder and a longer bench rather than a grid that is refused."""
SHAPES = 4
BUDGETS = 3
EVAL_TOKENS = 100_000
"""The validation slice every run scores (the same windows for each)."""
HELDOUT_TOLERANCE = 0.10
PROBE_STEPS = 30
BASE = (
    "preset=tiny",
    f"data.val_fraction={VAL_FRACTION}",
    "tokenizer.sample_bytes=16000000",
    "tokenizer.min_word_count=2",
    "tokenizer.vocab_size=1024",
    "model.n_head=8",
    "train.sequence_unlikelihood=0",
)
"""The tiny preset's family on the code corpus: 5% of the packages for validation (a few MB,
far more than the slice), the tokenizer on a 16 MB sample. A vocabulary of 1024 and heads 16
wide (8 at the preset's width of 128) make the family's smallest shapes small and close together
(one layer of width 32: 45k parameters, the head most of them), so a budget that 2 CPUs train in
a minute still has 4 distinct shapes around its optimum."""
GRID_LAYOUT = ("train.num_workers=1", "train.micro_batch_size=16")
"""Each grid run on one worker (two side by side); the held-out run keeps the preset's two
workers of 8 sequences: the same batch of 16, the same steps."""


def bench_overrides(corpus: Path, workdir: Path) -> list[str]:
    """The settings every run of the bench shares (the corpus, clean, tokenizer, workdir)."""
    return [
        *BASE,
        *CODE_FILTERS,
        f"data.paths=[{corpus}/*.jsonl]",
        f"workdir={workdir}",
    ]


def heldout_shape(family: list, n_star: float, aspect: float, tolerance: float = HELDOUT_TOLERANCE):
    """The family's shape for the held-out run: of the shapes whose N is within `tolerance` of
    N*, the one `nearest_shape` prefers (N, then the preset's aspect); the nearest of all when
    none is that close."""
    from lmforge.pipeline.scaling.shapes import nearest_shape

    close = [s for s in family if abs(s.params / n_star - 1) <= tolerance]
    return nearest_shape(close or family, n_star, aspect)


def lmforge(*args: str) -> str:
    """The `lmforge` CLI in a process of its own; its output (echoed), or SystemExit naming the
    command that failed."""
    started = time.monotonic()
    shown = " ".join(a for a in args if not a.startswith(("data.filters.", "workdir=")))
    print(f"$ lmforge {shown}", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "lmforge.pipeline.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tail = "\n".join(done.stdout.splitlines()[-15:])
    print(f"{tail}\n  ({time.monotonic() - started:.0f}s)", file=sys.stderr, flush=True)
    if done.returncode:
        raise SystemExit(f"lmforge {args[0]} {args[1] if len(args) > 1 else ''} failed: see above")
    return done.stdout


def probe_flops_per_s(root: Path, overrides: list[str]) -> tuple[float, float]:
    """(tokens/s, FLOPs per token) of lmforge's training steps on the tiny preset's model and
    two-worker layout, on random tokens: the median step after the first."""
    import statistics

    from lmforge.model.flops import training_flops_per_token
    from lmforge.pipeline.cluster.ray_runtime import ensure_ray, shutdown_ray
    from lmforge.pipeline.estimate.calibration.training_steps import (
        lmforge_run,
        tiny_case,
        write_shards,
    )

    case = tiny_case(list(overrides))
    data = write_shards(root / "probe-data", (PROBE_STEPS + 2) * case.batch, case.model)
    ensure_ray(None, num_cpus=2, workdir=root)
    try:
        summary = lmforge_run(root / "probe", data, PROBE_STEPS, case, cpus=2)
    finally:
        shutdown_ray()
    step_s = statistics.median(summary["step_seconds"])
    tokens = case.batch * case.model.block_size / step_s
    return tokens, float(training_flops_per_token(case.model))


def heldout_run(fit: dict, budget: float, config: dict, overrides: list[str]) -> dict:
    """Train and score the held-out run at the fit's N* for `budget`; its figures."""
    from lmforge.pipeline.engine.run_records import RecordBook
    from lmforge.pipeline.engine.workdir import Workdir
    from lmforge.pipeline.scaling.budget_plan import plan_budget
    from lmforge.pipeline.scaling.grid_sweep import eval_slice, variant_params
    from lmforge.pipeline.scaling.parametric_fit import LawParameters
    from lmforge.pipeline.scaling.plan import Variant
    from lmforge.pipeline.scaling.runs_input import run_from_manifests
    from lmforge.pipeline.scaling.shapes import model_config, shape_family
    from lmforge.pipeline.sweep.variant_figures import open_config_store

    base = model_config(config["model"], config["tokenizer"]["vocab_size"])
    family = shape_family(base)
    plan = plan_budget(fit, budget, family)
    shape = heldout_shape(family, plan.n_star, base.d_model / base.n_layer)
    batch_tokens = config["train"]["global_batch_size"] * base.block_size
    steps = round(budget / shape.flops_per_token / batch_tokens)
    run = Variant(budget, shape, steps, steps * batch_tokens, 0.0)
    params = variant_params(run, base, config["train"])
    settings = [f"{k}={v}" for k, v in {**eval_slice(EVAL_TOKENS), **params}.items()]
    lmforge("run", "--until", "perplexity", *overrides, *settings)
    workdir = Path(config["workdir"])
    record = RecordBook(Workdir(workdir).records).latest()
    keys = {s.stage: s.key for s in record.stages}
    store = open_config_store(config, workdir)
    found = run_from_manifests(
        store.manifest("pretrain", keys["pretrain"]) or {},
        store.manifest("perplexity", keys["perplexity"]) or {},
        budget,
    )
    train_tokens = store.manifest("tokenize", keys["tokenize"])["summary"]["train_tokens"]
    law = fit["law"]
    predicted = LawParameters(law["E"], law["A"], law["B"], law["alpha"], law["beta"]).loss(
        found.params, found.tokens
    )
    return {
        "budget": budget,
        "flops": found.flops,
        "params": found.params,
        "n_star": plan.n_star,
        "shape": shape.label,
        "predicted_loss": float(predicted),
        "measured_loss": found.loss,
        "tokens": found.tokens,
        "train_tokens": train_tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-only", type=Path, metavar="OUT")
    parser.add_argument("--target-mb", type=float, default=64.0)
    parser.add_argument("--target-minutes", type=float, default=45.0)
    parser.add_argument("--workdir", type=Path, help="default: a new folder under /tmp")
    parser.add_argument(
        "--budgets",
        help="the grid's budgets (FLOPs, C1,C2,C3) instead of the probe's: a bench rerun in its "
        "workdir takes every finished run from the cache",
    )
    args = parser.parse_args()
    started = time.monotonic()
    root = site_packages()
    if args.corpus_only:
        stats = build_corpus(root, args.corpus_only, int(args.target_mb * 2**20))
        roots = [str(r) for r in root]
        print(json.dumps({"bench": "scaling_law", "corpus": stats.to_json(), "roots": roots}))
        return
    run_bench(args, root, started)


def probe_budgets(workdir: Path, left_s: float) -> list[float]:
    """The grid's budgets: the probe's FLOP/s over what is left of the time target."""
    tokens_per_s, per_token = probe_flops_per_s(workdir, list(BASE[1:]))
    ladder = size_budgets(
        tokens_per_s,
        per_token,
        left_s - FIXED_S,
        budgets=BUDGETS,
        shapes=SHAPES,
        overhead_s=RUN_OVERHEAD_S,
    )
    print(
        f"probe: {tokens_per_s:.0f} tokens/s x {per_token:.3g} FLOPs/token = "
        f"{ladder.flops_per_s:.3g} FLOP/s; {left_s:.0f}s left: budgets "
        f"{', '.join(f'{b:.3g}' for b in ladder.budgets)}, held-out {ladder.heldout:.3g} "
        f"(planned {ladder.planned_s:.0f}s)",
        file=sys.stderr,
    )
    if ladder.budgets[0] < MIN_BUDGET:
        print(f"raised to {MIN_BUDGET:.3g} FLOPs at the smallest: past the target", file=sys.stderr)
        return [b * MIN_BUDGET / ladder.budgets[0] for b in ladder.budgets]
    return ladder.budgets


def run_bench(args: argparse.Namespace, root: list[Path], started: float) -> None:
    from lmforge.pipeline.config_tree import compose

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="lmforge-scaling-"))).resolve()
    corpus_dir = workdir / "corpus"
    stats = build_corpus(root, corpus_dir, int(args.target_mb * 2**20))
    print(f"corpus: {json.dumps(stats.to_json())} from {[str(r) for r in root]}", file=sys.stderr)
    overrides = bench_overrides(corpus_dir, workdir / "runs")
    config = compose(overrides)
    lmforge("run", "--until", "tokenize", *overrides)  # clean, tokenizer, tokenize: cached after
    if args.budgets:
        ladder_budgets = [float(b) for b in args.budgets.split(",")]
    else:
        ladder_budgets = probe_budgets(
            workdir, args.target_minutes * 60 - (time.monotonic() - started)
        )
    heldout_budget = HELDOUT_FACTOR * max(ladder_budgets)
    budgets = ",".join(f"{b:.4g}" for b in ladder_budgets)
    grid = [*overrides, *GRID_LAYOUT]
    lmforge(
        "scaling",
        "run",
        "--budgets",
        budgets,
        "--sizes",
        str(SHAPES),
        "--eval-tokens",
        str(EVAL_TOKENS),
        "--max-concurrent",
        "2",
        *grid,
    )
    out = lmforge("scaling", "fit", "--sweep", "latest", *grid)
    fit_path = Path(next(x for x in out.splitlines()[::-1] if x.startswith("fit: "))[5:].strip())
    fit = json.loads(fit_path.read_text(encoding="utf-8"))
    heldout = heldout_run(fit, heldout_budget, config, overrides)
    grid_budgets = sorted({float(r["budget"]) for r in fit["runs"]})
    line = result_line(
        budgets=grid_budgets,
        grid=fit["runs"],
        fit=fit,
        heldout=heldout,
        wall_s=time.monotonic() - started,
        machine=machine_name(),
        command="bench/scaling_law.py " + " ".join(sys.argv[1:]),
    )
    print(f"held-out {heldout['shape']}; fit {fit_path}; workdir {workdir}", file=sys.stderr)
    print(json.dumps(line))


if __name__ == "__main__":
    sys.exit(main())
