"""`lmforge scaling run`: the grid `scaling plan` prints, run as a sweep.

lmforge scaling run --budgets 1e13,3e13,1e14 [--sizes 4] [--max-epochs 4] [--fit ID]
    [--eval-tokens 200000] [--max-concurrent K] [--lease-wait S] [preset=...] [key=value ...]

The grid is checked first (too few steps, too small a model: one line, nothing runs). The stages
every variant shares (clean, the tokenizer, tokenize) run once, or come from the cache, so the
grid is sized against the corpus they measured; then each run of the grid is a variant of one
sweep (`pipeline/scaling/grid_sweep.py`), stopping after `perplexity`. Running the same command
again finishes only the variants that are not done. The learning-rate rule and the evaluation
slice: docs/scaling.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lmforge.pipeline.errors import ConfigError

SHARED_UNTIL = "tokenize"
"""The last stage every variant shares."""


def add_run_parser(verbs, with_overrides) -> None:
    """`scaling run`, beside `scaling plan` and `scaling fit`."""
    from lmforge.pipeline.engine.stage_leases import LEASE_WAIT_HELP
    from lmforge.pipeline.scaling.grid_sweep import EVAL_TOKENS

    run = with_overrides(verbs.add_parser("run", help="run a scaling grid as a sweep"))
    run.add_argument("--budgets", required=True, help="compute budgets in FLOPs (1e13,3e13)")
    run.add_argument("--sizes", type=int, default=4, help="shapes per budget (default 4)")
    run.add_argument(
        "--max-epochs", type=float, default=4.0, help="refuse runs repeating the corpus more"
    )
    run.add_argument("--fit", help="centre on this scaling fit's N*(C) (ID, latest or PATH)")
    run.add_argument(
        "--eval-tokens",
        type=int,
        default=EVAL_TOKENS,
        help=f"validation tokens every run scores (default {EVAL_TOKENS})",
    )
    run.add_argument("--max-concurrent", type=int, metavar="K", help="variants at once")
    run.add_argument("--lease-wait", type=float, metavar="SECONDS", help=LEASE_WAIT_HELP)
    run.set_defaults(handler=run_handler)


def run_handler(args: argparse.Namespace, config: dict) -> int:
    from lmforge.pipeline.scaling.budget_plan import fitted_optimum
    from lmforge.pipeline.scaling.grid_sweep import (
        UNTIL,
        grid_record,
        grid_variants,
        shared_overrides,
    )
    from lmforge.pipeline.scaling.plan import parse_budgets, plan_grid
    from lmforge.pipeline.scaling.shapes import model_config
    from lmforge.pipeline.sweep.driver import SweepOptions, run_sweep

    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise ConfigError(f"--max-concurrent {args.max_concurrent}: give 1 or more")
    if args.eval_tokens < 1:
        raise ConfigError(f"--eval-tokens {args.eval_tokens}: give 1 or more")
    workdir = Path(config["workdir"]).expanduser().resolve()
    base = model_config(config["model"], config["tokenizer"]["vocab_size"])
    batch_tokens = config["train"]["global_batch_size"] * base.block_size
    budgets = parse_budgets(args.budgets)
    optimum = fitted_optimum(args.fit, workdir, base) if args.fit else None

    def grid(train_tokens: float | None):
        return plan_grid(
            budgets,
            args.sizes,
            base,
            batch_tokens,
            train_tokens,
            max_epochs=args.max_epochs,
            optimum=optimum,
        )

    grid(None)  # the refusals that need no corpus, before anything runs
    train_tokens = shared_stages(config, args.lease_wait)
    runs = grid(train_tokens)
    variants = grid_variants(runs, base, config["train"])
    overrides = list(args.overrides)
    if getattr(args, "ray_address", None):
        overrides.append(f"cluster.ray_address={args.ray_address}")
    options = SweepOptions(
        command=f"lmforge scaling run --budgets {args.budgets} --sizes {args.sizes}",
        max_concurrent=args.max_concurrent,
        lease_wait_s=args.lease_wait,
        until=UNTIL,
        scaling=grid_record(runs, variants, train_tokens, base, args.eval_tokens),
    )
    record = run_sweep(shared_overrides(overrides, variants, args.eval_tokens), variants, options)
    if record.state == "finished":
        print(f"fit it: lmforge scaling fit --sweep {record.sweep_id} workdir={workdir}")
        return 0
    print(f"not every variant finished: run the same command again to finish {record.sweep_id}")
    return 1


def shared_stages(config: dict, lease_wait_s: float | None) -> float:
    """Run (or find cached) the stages every variant shares; the training tokens that
    `tokenize` made of the corpus (summed over a mixture's sources)."""
    from lmforge.pipeline.engine.run_request import RunRequest, plan_for
    from lmforge.pipeline.engine.runner import run_pipeline
    from lmforge.pipeline.sweep.variant_figures import open_config_store

    request = RunRequest(
        config=config,
        command="scaling run (shared stages)",
        until=SHARED_UNTIL,
        lease_wait_s=lease_wait_s,
    )
    _, plan, workdir = plan_for(request)
    if plan.to_run():
        run_pipeline(request)  # raises StageFailed, in one line, when one fails
    store = open_config_store(config, workdir.root)
    tokens = 0.0
    for name in plan.order:
        if name.split("[", 1)[0] == SHARED_UNTIL:
            summary = (store.manifest(name, plan.stages[name].key) or {}).get("summary", {})
            tokens += float(summary.get("train_tokens") or 0)
    return tokens
